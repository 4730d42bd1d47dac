package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// WatchOptions says which outcomes to watch and from where. Filters combine with AND; the
// values of one filter with OR. Kinds and Actors are applied by the server (subject filters);
// the others by the watcher, on the decoded outcome.
type WatchOptions struct {
	// Where to start, first that applies: after stream sequence After (a Delivery's Cursor:
	// resume exactly where a previous watch stopped); at Since (every outcome decided from
	// then on still in the stream); the whole stream (FromStart); else only outcomes published
	// from now on.
	After     uint64
	Since     time.Time
	FromStart bool

	Kinds          []OutcomeKind
	Actors         []string // actor ids, e.g. "player:ada"
	CorrelationIDs []string
	EventIDs       []string
	LocationIDs    []string
}

// Delivery is one outcome and its position in stream OUTCOMES. Cursor resumes a watch right
// after it (WatchOptions.After); OutcomeID de-duplicates (delivery is at-least-once: a watch
// resumed from an older cursor delivers again what it had delivered).
type Delivery struct {
	Cursor  uint64
	Outcome *Outcome
}

// UndecodableError is returned by Watcher.Next for an outcome this reader cannot decode (a
// newer schemaVersion, say) or must not believe (its body does not match the subject it was
// published on: Err is then a *MisroutedError). The watch goes on: call Next again; a reader
// that shows outcomes to people counts these and drops them.
type UndecodableError struct {
	Cursor uint64
	Err    error
}

func (e *UndecodableError) Error() string {
	return fmt.Sprintf("outcome at sequence %d cannot be read: %v", e.Cursor, e.Err)
}

func (e *UndecodableError) Unwrap() error { return e.Err }

// Watcher is a typed, resumable stream of outcomes. Outcomes arrive in stream order, hence
// in order per actor (each actor's decisions are published in the order they are taken).
type Watcher struct {
	cons   jetstream.Consumer
	iter   jetstream.MessagesContext
	opts   WatchOptions
	cursor uint64
}

// Watch starts watching stream OUTCOMES through js with an ordered consumer of its own (it
// needs no durable state on the server: the caller keeps the cursor). Close it when done.
func Watch(ctx context.Context, js jetstream.JetStream, opts WatchOptions) (*Watcher, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: outcomeFilters(opts.Kinds, opts.Actors)}
	switch {
	case opts.After > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, opts.After+1
	case !opts.Since.IsZero():
		t := opts.Since.UTC()
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	case opts.FromStart:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	default:
		// Start after the last outcome stored now, rather than DeliverNew: the position is
		// fixed when Watch returns, not when the server creates the consumer later, so an
		// outcome published right after Watch returns is not missed.
		s, err := js.Stream(ctx, StreamOutcomes)
		if err != nil {
			return nil, fmt.Errorf("watch outcomes: stream %s: %w", StreamOutcomes, err)
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, s.CachedInfo().State.LastSeq+1
	}
	cons, err := js.OrderedConsumer(ctx, StreamOutcomes, cfg)
	if err != nil {
		return nil, fmt.Errorf("watch outcomes: %w", err)
	}
	iter, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("watch outcomes: %w", err)
	}
	return &Watcher{cons: cons, iter: iter, opts: opts, cursor: opts.After}, nil
}

// outcomeFilters turns kind and actor filters into non-overlapping subject filters.
func outcomeFilters(kinds []OutcomeKind, actors []string) []string {
	ks := []string{"*"}
	if len(kinds) > 0 {
		ks = ks[:0]
		for _, k := range kinds {
			ks = append(ks, string(k))
		}
	}
	as := []string{">"}
	if len(actors) > 0 {
		as = as[:0]
		for _, a := range actors {
			as = append(as, ActorToken(a))
		}
	}
	if len(kinds) == 0 && len(actors) == 0 {
		return []string{SubjectOutcomesAll}
	}
	var out []string
	for _, k := range ks {
		for _, a := range as {
			out = append(out, subjectOutcomePrefix+k+"."+a)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Cursor is the stream sequence of the last outcome Next returned (or skipped as filtered
// out): WatchOptions.After resumes after it.
func (w *Watcher) Cursor() uint64 { return w.cursor }

// Next waits for the next outcome that passes the filters, until ctx ends.
func (w *Watcher) Next(ctx context.Context) (Delivery, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Delivery{}, err
		}
		msg, err := w.nextMsg(ctx)
		if err != nil {
			return Delivery{}, err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return Delivery{}, fmt.Errorf("watch outcomes: %w", err)
		}
		w.cursor = meta.Sequence.Stream
		o, err := DecodeOutcome(msg.Data())
		if err == nil {
			err = CheckOutcomeSubject(msg.Subject(), o)
		}
		if err != nil {
			return Delivery{}, &UndecodableError{Cursor: w.cursor, Err: err}
		}
		if w.match(o) {
			return Delivery{Cursor: w.cursor, Outcome: o}, nil
		}
	}
}

// nextMsg waits for the next message, giving up when ctx ends (the iterator's Next has no
// context; a stop from another goroutine ends it).
func (w *Watcher) nextMsg(ctx context.Context) (jetstream.Msg, error) {
	type result struct {
		msg jetstream.Msg
		err error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := w.iter.Next()
		ch <- result{m, err}
	}()
	select {
	case r := <-ch:
		if errors.Is(r.err, jetstream.ErrMsgIteratorClosed) {
			return nil, fmt.Errorf("watch outcomes: closed: %w", r.err)
		}
		return r.msg, r.err
	case <-ctx.Done():
		// Stop the iterator so the goroutine returns; the watcher cannot be used afterwards.
		w.iter.Stop()
		<-ch
		return nil, ctx.Err()
	}
}

func (w *Watcher) match(o *Outcome) bool {
	in := func(set []string, v string) bool { return len(set) == 0 || slices.Contains(set, v) }
	return in(w.opts.CorrelationIDs, o.CorrelationID) && in(w.opts.EventIDs, o.EventID) && in(w.opts.LocationIDs, o.LocationID)
}

// Close stops the watch.
func (w *Watcher) Close() { w.iter.Stop() }

// AwaitOption adjusts Await.
type AwaitOption func(*awaitConfig)

type awaitConfig struct {
	count   int
	roles   []string
	publish []PublishOption
}

// AwaitCount waits for n final outcomes of the event (default 1: every event type of this
// contract triggers one agent role).
func AwaitCount(n int) AwaitOption { return func(c *awaitConfig) { c.count = max(n, 1) } }

// AwaitRoles waits for one final outcome from each of these agent roles.
func AwaitRoles(roles ...string) AwaitOption { return func(c *awaitConfig) { c.roles = roles } }

// AwaitPublishOptions passes options to Publish (headers such as traceparent).
func AwaitPublishOptions(opts ...PublishOption) AwaitOption {
	return func(c *awaitConfig) { c.publish = opts }
}

// PendingError is Await's error when ctx ends before every expected outcome arrived: it says
// what arrived and what is still pending.
type PendingError struct {
	EventID, Type, CorrelationID string
	Want                         int
	Roles                        []string // roles still without an outcome (AwaitRoles)
	Got                          []*Outcome
	Waited                       time.Duration
	Err                          error // ctx.Err()
}

func (e *PendingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "event %s (%s, correlation %s): %d of %d final outcomes after %s", e.EventID, e.Type, e.CorrelationID,
		len(e.Got), e.Want, e.Waited.Round(time.Millisecond))
	for _, o := range e.Got {
		fmt.Fprintf(&b, "; got %s from %s", o.Kind, cmpOr(o.AgentRole, "?"))
	}
	if len(e.Roles) > 0 {
		fmt.Fprintf(&b, "; still pending: an outcome from %s", strings.Join(e.Roles, ", "))
	} else {
		fmt.Fprintf(&b, "; still pending: %d outcome(s)", e.Want-len(e.Got))
	}
	b.WriteString(" (every event the agents consume gets an outcome — committed, fallback, refused or skipped — and this one has none yet: the agents may be busy or stopped, a proposal may be held for approval or retrying; `worldgate trace " + e.CorrelationID + "` shows where it is)")
	return b.String()
}

func (e *PendingError) Unwrap() error { return e.Err }

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Await publishes env (as Publish does) and waits for its final outcome(s): by default the
// first; AwaitCount and AwaitRoles ask for more. Every outcome is final, a skipped one too (the
// agent role decided not to act on the event: Outcome.Skip says why and when to ask again). It watches before publishing, so nothing
// decided in between is missed. When ctx ends first, the error is a *PendingError saying what
// arrived and what is still pending. A republished envelope (same idempotency key) is not
// published twice; its outcomes are found only if they are decided after the watch starts.
func Await(ctx context.Context, js jetstream.JetStream, env *Envelope, opts ...AwaitOption) ([]*Outcome, error) {
	cfg := awaitConfig{count: 1}
	for _, o := range opts {
		o(&cfg)
	}
	want := cfg.count
	if len(cfg.roles) > 0 {
		want = len(cfg.roles)
	}
	start := time.Now()
	w, err := Watch(ctx, js, WatchOptions{Actors: []string{env.Actor.ID}, EventIDs: []string{env.EventID}})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if _, err := Publish(ctx, js, env, cfg.publish...); err != nil {
		return nil, err
	}
	var got []*Outcome
	seen := map[string]bool{}
	pendingRoles := slices.Clone(cfg.roles)
	for {
		if len(cfg.roles) > 0 && len(pendingRoles) == 0 || len(cfg.roles) == 0 && len(got) >= want {
			return got, nil
		}
		d, err := w.Next(ctx)
		var undecodable *UndecodableError
		switch {
		case errors.As(err, &undecodable):
			continue
		case err != nil && ctx.Err() != nil:
			return got, &PendingError{EventID: env.EventID, Type: env.Type, CorrelationID: env.CorrelationID, Want: want,
				Roles: pendingRoles, Got: got, Waited: time.Since(start), Err: ctx.Err()}
		case err != nil:
			return got, err
		}
		o := d.Outcome
		if seen[o.OutcomeID] {
			continue
		}
		seen[o.OutcomeID] = true
		if len(cfg.roles) > 0 {
			i := slices.Index(pendingRoles, o.AgentRole)
			if i < 0 {
				continue
			}
			pendingRoles = slices.Delete(pendingRoles, i, i+1)
		}
		got = append(got, o)
	}
}
