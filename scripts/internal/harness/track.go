package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
)

// Tracker reads every outcome back from the streams as it is written: committed domain events
// (COMMITTED), rejections (proposals.rejected.> on PROPOSALS) and dead letters (DLQ). It starts
// after what the streams held when it was created, so it sees only this run.
type Tracker struct {
	mu         sync.Mutex
	byProposal map[string]*Outcome
	byCorr     map[string][]string // correlation id → proposal ids, in arrival order
	latencies  []time.Duration     // event → commit, one per first commit of a correlation id
	firstAt    map[string]time.Time
	committed  int // committed messages (stream level, duplicates included)
	rejected   int
	rejectedBy map[string]int // gate/code
	dead       int
	deadBy     map[string]int
	kinds      map[string]int
	answers    map[string][]Answer // correlation id (the run's) → final outcomes, in arrival order
	seenOutc   map[string]bool     // outcome ids seen (a redelivered decision counts once)
	where      map[string]string   // player id → location after its last committed move
	prefix     string              // correlation ids of the run's events
	events     int                 // correlation ids with the prefix and a decided proposal (or none: answeredBare)
	// answeredBare: the run's events answered by an outcome that names no proposal (a
	// request the ai-worker answered with reused content without a model call, a refused
	// move request): decided, though nothing was proposed.
	answeredBare map[string]bool
	changed      chan struct{}
	stops        []func()
	// outcomesRead counts the OUTCOMES messages read (onOutcome's strict sample).
	outcomesRead atomic.Int64
}

// Outcome is what the streams say happened to one proposal.
type Outcome struct {
	Kind          string
	CorrelationID string
	Commits       int      // COMMITTED messages for it (more than its event count = a duplicate)
	EventIDs      []string // distinct domain event ids
	Rejections    int      // rejection messages for it
	Gate, Code    string   // of the last rejection
}

// Decided reports whether the proposal was committed or rejected.
func (o *Outcome) Decided() bool { return o.Commits > 0 || o.Rejections > 0 }

// StartTracker subscribes to the streams from their current ends. Latencies and event counts
// cover correlation ids that begin with prefix (the run's events); outcomes cover everything.
func StartTracker(ctx context.Context, js jetstream.JetStream, prefix string) (*Tracker, error) {
	t := &Tracker{prefix: prefix, where: map[string]string{}, byProposal: map[string]*Outcome{}, byCorr: map[string][]string{}, firstAt: map[string]time.Time{},
		rejectedBy: map[string]int{}, deadBy: map[string]int{}, kinds: map[string]int{}, answers: map[string][]Answer{}, seenOutc: map[string]bool{}, answeredBare: map[string]bool{},
		changed: make(chan struct{}, 1)}
	subs := []struct {
		stream  string
		subject string
		fn      func(jetstream.Msg)
	}{
		{events.StreamCommitted, "", t.onCommitted},
		{events.StreamProposals, "proposals.rejected.>", t.onRejected},
		{events.StreamDLQ, "", t.onDead},
		{events.StreamOutcomes, "", t.onOutcome},
	}
	for _, s := range subs {
		stream, err := js.Stream(ctx, s.stream)
		if err != nil {
			t.Stop()
			return nil, err
		}
		info, err := stream.Info(ctx)
		if err != nil {
			t.Stop()
			return nil, err
		}
		cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: info.State.LastSeq + 1}
		if s.subject != "" {
			cfg.FilterSubjects = []string{s.subject}
		}
		c, err := stream.OrderedConsumer(ctx, cfg)
		if err != nil {
			t.Stop()
			return nil, err
		}
		fn := s.fn
		cc, err := c.Consume(func(m jetstream.Msg) { fn(m) }, jetstream.PullMaxMessages(1000))
		if err != nil {
			t.Stop()
			return nil, err
		}
		t.stops = append(t.stops, cc.Stop)
	}
	return t, nil
}

// Stop ends the subscriptions.
func (t *Tracker) Stop() {
	for _, s := range t.stops {
		s()
	}
	t.stops = nil
}

func (t *Tracker) outcome(proposalID, corr, kind string) *Outcome {
	o := t.byProposal[proposalID]
	if o == nil {
		o = &Outcome{Kind: kind, CorrelationID: corr}
		t.byProposal[proposalID] = o
		if len(t.byCorr[corr]) == 0 && !t.answeredBare[corr] && strings.HasPrefix(corr, t.prefix) {
			t.events++
		}
		t.byCorr[corr] = append(t.byCorr[corr], proposalID)
	}
	return o
}

func (t *Tracker) notify() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *Tracker) onCommitted(m jetstream.Msg) {
	var e events.DomainEvent
	if err := json.Unmarshal(m.Data(), &e); err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.committed++
	if e.Kind == events.KindPlayerMoved {
		var mv events.PlayerMovedPayload
		if json.Unmarshal(e.Payload, &mv) == nil {
			t.where[mv.PlayerID] = mv.ToLocationID
		}
	}
	o := t.outcome(e.ProposalID, e.CorrelationID, e.Kind)
	o.Commits++
	if !slices.Contains(o.EventIDs, e.EventID) {
		o.EventIDs = append(o.EventIDs, e.EventID)
	}
	if _, seen := t.firstAt[e.CorrelationID]; !seen && strings.HasPrefix(e.CorrelationID, t.prefix) {
		t.firstAt[e.CorrelationID] = e.CommittedUTC
		t.kinds[e.Kind]++
		if !e.OccurredUTC.IsZero() {
			t.latencies = append(t.latencies, e.CommittedUTC.Sub(e.OccurredUTC))
		}
	}
	t.notify()
}

func (t *Tracker) onRejected(m jetstream.Msg) {
	var r events.Rejection
	if err := json.Unmarshal(m.Data(), &r); err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rejected++
	t.rejectedBy[r.Gate+"/"+string(r.Code)]++
	o := t.outcome(r.ProposalID, r.CorrelationID, r.Kind)
	o.Rejections++
	o.Gate, o.Code = r.Gate, string(r.Code)
	t.notify()
}

func (t *Tracker) onDead(m jetstream.Msg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dead++
	t.deadBy[m.Headers().Get(events.HeaderDLQStage)+": "+firstLine(m.Headers().Get(events.HeaderDLQReason))]++
	t.notify()
}

// Answer is one final outcome of a run's event, as the game receives it (events.Outcome).
type Answer struct {
	Kind events.OutcomeKind
	// Of is the proposal kind the outcome is about (quest_seed, …), else the agent role that
	// decided it (a refused move, a skip).
	Of string
	// Gate and Code of a refusal.
	Gate, Code string
	// OnFallback: the refused proposal carried fallback content (nothing safer was left to
	// offer: the request was abandoned).
	OnFallback bool
}

// strictEvery is how often the tracker decodes an outcome strictly (against its JSON Schema, as a
// game server would): the first strictFirst of a run and then one in strictEvery. An outcome that
// fails is dropped, so its event shows up as silent. The rest are decoded plainly: a strict
// decode is about a quarter of bench's own CPU, which shares the machine with the pipeline it
// measures.
const (
	strictFirst = 200
	strictEvery = 16
)

func (t *Tracker) onOutcome(m jetstream.Msg) {
	n := t.outcomesRead.Add(1)
	var o *events.Outcome
	if n <= strictFirst || n%strictEvery == 0 {
		var err error
		if o, err = events.DecodeOutcome(m.Data()); err != nil {
			return
		}
	} else {
		o = new(events.Outcome)
		if err := json.Unmarshal(m.Data(), o); err != nil {
			return
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seenOutc[o.OutcomeID] || !strings.HasPrefix(o.CorrelationID, t.prefix) {
		return
	}
	t.seenOutc[o.OutcomeID] = true
	if o.ProposalID == "" && len(t.byCorr[o.CorrelationID]) == 0 && !t.answeredBare[o.CorrelationID] {
		t.answeredBare[o.CorrelationID] = true
		t.events++
	}
	a := Answer{Kind: o.Kind, Of: o.ProposalKind}
	if a.Of == "" {
		a.Of = o.AgentRole
	}
	if o.Refusal != nil {
		a.Gate, a.Code = o.Refusal.Gate, string(o.Refusal.Code)
		a.OnFallback = o.Journey != nil && o.Journey.Provider == "fallback"
	}
	t.answers[o.CorrelationID] = append(t.answers[o.CorrelationID], a)
	t.notify()
}

// Answers is what the run's events got back: per outcome kind, the events whose first final
// outcome was of that kind — Committed new content (or a move), Reused content accepted
// earlier for the same target, Fallback content, Refused, Skipped — in all and per proposal
// kind (ByKind); refusals per gate/code; Abandoned, the events refused even their fallback
// content or given up after transient refusals; and Silent, the events among corrs with no
// outcome at all.
type Answers struct {
	Answered  int `json:"answered"`
	Committed int `json:"committed"`
	Reused    int `json:"reused"`
	Fallback  int `json:"fallback"`
	Refused   int `json:"refused"`
	Skipped   int `json:"skipped"`
	// ByKind splits the answers by proposal kind (or the deciding agent role where there was
	// no proposal).
	ByKind    map[string]*KindAnswers `json:"byKind,omitempty"`
	RefusedBy map[string]int          `json:"refusedBy,omitempty"`
	Abandoned int                     `json:"abandoned"`
	Silent    int                     `json:"silent"`
}

// KindAnswers are one proposal kind's answers by outcome kind.
type KindAnswers struct {
	Committed int `json:"committed"`
	Reused    int `json:"reused"`
	Fallback  int `json:"fallback"`
	Refused   int `json:"refused"`
	Skipped   int `json:"skipped"`
}

// Of is how many answers a of outcome kind k counts.
func (a *Answers) Of(k events.OutcomeKind) int {
	switch k {
	case events.OutcomeCommitted:
		return a.Committed
	case events.OutcomeReused:
		return a.Reused
	case events.OutcomeFallback:
		return a.Fallback
	case events.OutcomeRefused:
		return a.Refused
	case events.OutcomeSkipped:
		return a.Skipped
	}
	return 0
}

// Share is n as a share of the answered events (0 when none was answered).
func (a *Answers) Share(n int) float64 {
	if a.Answered == 0 {
		return 0
	}
	return float64(n) / float64(a.Answered)
}

// Answers summarises the outcomes of the events with correlation ids corrs.
func (t *Tracker) Answers(corrs []string) Answers {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := Answers{RefusedBy: map[string]int{}, ByKind: map[string]*KindAnswers{}}
	for _, c := range corrs {
		got := t.answers[c]
		if len(got) == 0 {
			a.Silent++
			continue
		}
		a.Answered++
		first := got[0]
		k := a.ByKind[first.Of]
		if k == nil {
			k = &KindAnswers{}
			a.ByKind[first.Of] = k
		}
		switch first.Kind {
		case events.OutcomeCommitted:
			a.Committed++
			k.Committed++
		case events.OutcomeReused:
			a.Reused++
			k.Reused++
		case events.OutcomeFallback:
			a.Fallback++
			k.Fallback++
		case events.OutcomeSkipped:
			a.Skipped++
			k.Skipped++
		case events.OutcomeRefused:
			a.Refused++
			k.Refused++
			a.RefusedBy[first.Gate+"/"+first.Code]++
			if first.OnFallback || first.Code == string(events.CodeGaveUp) {
				a.Abandoned++
			}
		}
	}
	return a
}

// AnsweredCount is how many of corrs have a final outcome.
func (t *Tracker) AnsweredCount(corrs []string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range corrs {
		if len(t.answers[c]) > 0 {
			n++
		}
	}
	return n
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// Counts is a snapshot of what the tracker has seen.
type Counts struct {
	Committed    int            // committed messages
	Rejected     int            // rejection messages
	DeadLetters  int            // DLQ messages
	DecidedCorrs int            // the run's events with at least one decided proposal
	CommitsCorrs int            // the run's events with a commit
	RejectedBy   map[string]int // gate/code → rejection messages
	DeadBy       map[string]int
	Kinds        map[string]int // first commits by proposal kind
}

// Counts returns a snapshot.
func (t *Tracker) Counts() Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := Counts{Committed: t.committed, Rejected: t.rejected, DeadLetters: t.dead, CommitsCorrs: len(t.firstAt),
		RejectedBy: clone(t.rejectedBy), DeadBy: clone(t.deadBy), Kinds: clone(t.kinds)}
	c.DecidedCorrs = t.events
	return c
}

func clone(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Latencies returns the event-to-commit latencies seen so far (a copy).
func (t *Tracker) Latencies() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.latencies)
}

// CommitTimes returns when the first commit of each correlation id happened.
func (t *Tracker) CommitTimes() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]time.Time, 0, len(t.firstAt))
	for _, at := range t.firstAt {
		out = append(out, at)
	}
	return out
}

// Outcomes returns, per correlation id in corrs, the outcomes of its proposals.
func (t *Tracker) Outcomes(corrs []string) map[string][]Outcome {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string][]Outcome, len(corrs))
	for _, c := range corrs {
		for _, id := range t.byCorr[c] {
			out[c] = append(out[c], *t.byProposal[id])
		}
	}
	return out
}

// WaitProposals waits until every proposal id is decided.
func (t *Tracker) WaitProposals(ctx context.Context, ids []string) error {
	return t.waitUntil(ctx, func() (bool, string) {
		missing := 0
		for _, id := range ids {
			if o := t.byProposal[id]; o == nil || !o.Decided() {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d proposals undecided", missing, len(ids))
	})
}

// Where is where player stands after its last committed move ("" if it has not moved).
func (t *Tracker) Where(player string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.where[player]
}

// Decided reports whether the event with correlation id corr has a decided proposal.
func (t *Tracker) Decided(corr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byCorr[corr]) > 0 || t.answeredBare[corr]
}

// WaitDecided waits until the event with correlation id corr has a decided proposal.
func (t *Tracker) WaitDecided(ctx context.Context, corr string) error {
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		t.mu.Lock()
		n := len(t.byCorr[corr])
		if t.answeredBare[corr] {
			n++
		}
		t.mu.Unlock()
		if n > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// WaitEvents waits until n of the run's events have a decided proposal, or ctx ends.
func (t *Tracker) WaitEvents(ctx context.Context, n int) error {
	return t.waitUntil(ctx, func() (bool, string) {
		return t.events >= n, fmt.Sprintf("%d of %d events decided", t.events, n)
	})
}

func (t *Tracker) waitUntil(ctx context.Context, done func() (bool, string)) error {
	for {
		t.mu.Lock()
		ok, state := done()
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), state)
		case <-t.changed:
		case <-time.After(100 * time.Millisecond):
		}
	}
}
