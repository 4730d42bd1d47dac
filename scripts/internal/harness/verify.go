package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/event-processor/apply"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/shared/graphx"
)

// Audit is the exactly-once check of a run, read afresh from the streams and the graph once
// the pipeline is quiet.
type Audit struct {
	Events    int `json:"events"`    // events published
	Committed int `json:"committed"` // events whose proposal was committed once
	Rejected  int `json:"rejected"`  // events whose proposal was rejected once
	// RejectedStale counts the rejected moves proposed while an earlier move of the player was
	// undecided, from where the player stood before it (Generator.Stale): refusals the game's
	// stale view explains. Rejected - RejectedStale are refusals of moves proposed from where
	// the player was.
	RejectedStale int `json:"rejectedStale"`
	// RejectedExamples are a few of the others (Rejected - RejectedStale): correlation id, the
	// refusing gate, code and reason, for a person to trace.
	RejectedExamples []string `json:"rejectedExamples,omitempty"`
	Lost             int      `json:"lost"`        // events with no decided proposal
	Duplicated       int      `json:"duplicated"`  // events decided more than once (stream or graph)
	DeadLetters      int      `json:"deadLetters"` // DLQ messages of the run (counted in Lost when they hold an event)
	// GraphMismatch counts events whose graph markers disagree with the streams (an applied
	// marker without a committed event, or the reverse).
	GraphMismatch int      `json:"graphMismatch"`
	Examples      []string `json:"examples,omitempty"` // a few lost or duplicated, for a person to trace
	// OrderViolations counts the writer's decisions out of their actor's order: for each actor,
	// the order of its events on COMMITTED, with the event-processor's refusals at the commit
	// merged in by time, must follow the WORLD order of the events that caused them
	// (CheckOrder). OrderExamples are a few, for a person to trace.
	OrderViolations int `json:"orderViolations"`
	// CommitOrderViolations counts those among the commits alone (COMMITTED order against the
	// WORLD order of their causes): what the log of applied events shows out of order, without
	// the refusals at the commit that a stage before the writer's overtaking leaves.
	CommitOrderViolations int      `json:"commitOrderViolations"`
	OrderExamples         []string `json:"orderExamples,omitempty"`
}

// Failed reports whether the audit found anything lost, duplicated, out of order or
// disagreeing with the graph.
func (a *Audit) Failed() bool {
	return a.Lost > 0 || a.Duplicated > 0 || a.GraphMismatch > 0 || a.OrderViolations > 0
}

// AuditRun checks that each of the n events with correlation ids gen.CorrelationID(0..n-1)
// ended exactly once: one proposal, committed (one COMMITTED message and one AppliedEvent
// marker) or rejected (one rejection). Moves only: an AI event may legitimately lead to several
// proposals (reprompts). It also checks each actor's commits and refusals at the commit against
// the order of their causes on WORLD (CheckOrder): a committed event and a rejection point back
// to their cause by correlation id.
func AuditRun(ctx context.Context, js jetstream.JetStream, graph graphx.Settings, gen *Generator, n int) (*Audit, error) {
	a := &Audit{Events: n}
	type cause struct {
		actor string
		seq   uint64
	}
	causes := map[string]cause{} // correlation id → the world event's actor and WORLD sequence
	var commits, refusals []Decision
	type seen struct {
		proposals  map[string]bool
		commits    int
		rejections int
		applied    int
		refusal    string // the last rejection's gate, code and reason
	}
	byCorr := map[string]*seen{}
	get := func(corr string) *seen {
		s := byCorr[corr]
		if s == nil {
			s = &seen{proposals: map[string]bool{}}
			byCorr[corr] = s
		}
		return s
	}
	ours := func(corr string) bool { return strings.HasPrefix(corr, gen.Prefix) }
	decision := func(corr string, at time.Time, refused bool) *Decision {
		c, ok := causes[corr]
		if !ok {
			return nil
		}
		return &Decision{Actor: c.actor, Cause: corr, CauseSeq: c.seq, Refused: refused, At: at}
	}
	err := scanStream(ctx, js, events.StreamWorld, func(m storedMsg) {
		var e events.Envelope
		if json.Unmarshal(m.data, &e) == nil && ours(e.CorrelationID) {
			if _, ok := causes[e.CorrelationID]; !ok { // a copy past the duplicate window is not the cause
				causes[e.CorrelationID] = cause{actor: e.Actor.Kind + ":" + e.Actor.ID, seq: m.seq}
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read WORLD: %w", err)
	}
	err = scanStream(ctx, js, events.StreamCommitted, func(m storedMsg) {
		var e events.DomainEvent
		if json.Unmarshal(m.data, &e) == nil && ours(e.CorrelationID) {
			s := get(e.CorrelationID)
			s.commits++
			s.proposals[e.ProposalID] = true
			if d := decision(e.CorrelationID, m.at, false); d != nil {
				commits = append(commits, *d)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read COMMITTED: %w", err)
	}
	err = scanStream(ctx, js, events.StreamProposals, func(m storedMsg) {
		if !strings.HasPrefix(m.subject, "proposals.rejected.") {
			return
		}
		var r events.Rejection
		if json.Unmarshal(m.data, &r) == nil && ours(r.CorrelationID) {
			s := get(r.CorrelationID)
			s.rejections++
			s.proposals[r.ProposalID] = true
			s.refusal = fmt.Sprintf("%s %s at %s: %s", r.Gate, r.Code, m.at.UTC().Format("15:04:05.000"), r.Reason)
			if d := decision(r.CorrelationID, m.at, true); d != nil && r.Gate == processor.Gate {
				refusals = append(refusals, *d)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read PROPOSALS: %w", err)
	}
	order := CheckOrder(MergeDecisions(commits, refusals), 5)
	a.OrderViolations, a.OrderExamples = order.Violations, order.Examples
	a.CommitOrderViolations = CheckOrder(commits, 0).Violations
	err = scanStream(ctx, js, events.StreamDLQ, func(m storedMsg) {
		var v struct {
			CorrelationID string `json:"correlationId"`
		}
		if json.Unmarshal(m.data, &v) == nil && ours(v.CorrelationID) {
			a.DeadLetters++
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read DLQ: %w", err)
	}
	conn, err := graphx.Open(graph)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	res, err := conn.Submit(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V().HasLabel(apply.LabelApplied).Values("correlationId")
	})
	if err != nil {
		return nil, fmt.Errorf("read the graph's applied markers: %w", err)
	}
	for _, v := range res {
		if corr, ok := v.(string); ok && ours(corr) {
			get(corr).applied++
		}
	}
	example := func(format string, args ...any) {
		if len(a.Examples) < 10 {
			a.Examples = append(a.Examples, fmt.Sprintf(format, args...))
		}
	}
	for i := range n {
		corr := gen.CorrelationID(i)
		s := byCorr[corr]
		switch {
		case s == nil || s.commits+s.rejections == 0:
			a.Lost++
			example("%s: no commit and no rejection", corr)
			continue
		case len(s.proposals) > 1 || s.commits+s.rejections > 1:
			a.Duplicated++
			example("%s: %d proposals, %d commits, %d rejections", corr, len(s.proposals), s.commits, s.rejections)
		case s.commits == 1:
			a.Committed++
		default:
			a.Rejected++
			if gen.Stale(corr) {
				a.RejectedStale++
			} else if len(a.RejectedExamples) < 10 {
				after := "its player's first move"
				if prev := gen.Previous(corr); prev != "" {
					after = "after " + prev
					if p := byCorr[prev]; p != nil {
						after += fmt.Sprintf(" (%d committed, %d rejected)", p.commits, p.rejections)
					}
				}
				a.RejectedExamples = append(a.RejectedExamples, corr+", "+after+": "+s.refusal)
			}
		}
		if s.applied > 1 {
			a.Duplicated++
			example("%s: applied %d times in the graph", corr, s.applied)
		}
		if (s.commits > 0) != (s.applied > 0) {
			a.GraphMismatch++
			example("%s: %d commits but %d applied markers", corr, s.commits, s.applied)
		}
	}
	return a, nil
}

// storedMsg is a message as a stream stored it.
type storedMsg struct {
	subject string
	seq     uint64
	at      time.Time // stored
	data    []byte
}

// scanStream calls fn for every message stream holds now, in stream order.
func scanStream(ctx context.Context, js jetstream.JetStream, stream string, fn func(storedMsg)) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	for {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("stream %s: %w", stream, err)
			}
			fn(storedMsg{subject: m.Subject(), seq: meta.Sequence.Stream, at: meta.Timestamp, data: m.Data()})
			if meta.Sequence.Stream >= last {
				return nil
			}
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if got == 0 {
			return fmt.Errorf("stream %s: read stopped before sequence %d", stream, last)
		}
	}
}
