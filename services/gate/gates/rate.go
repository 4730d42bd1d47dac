package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/actorpolicy"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// rate enforces budgets per proposal kind in fixed windows: per actor and global, each a count
// and a USD cost (provenance.costUsd). Windows are KV entries in natsx.BucketRate updated with
// compare-and-set (retrying on conflict), so every replica draws on the same budget and
// together they never admit more than it. Admission reserves the actor's budget, then the
// global one (giving the actor's back if the global one is spent). A redelivered proposal is
// not counted twice: the actor's window lists the proposals it admitted (their admission
// tokens, the latest maxAdmitted), written by the same compare-and-set that counts them, so a
// proposal found there passes at once. Without an actor budget, an admission marker (a key of
// its own) does that instead: created after reserving, read when a window refuses. A
// redelivery after its window has ended is counted in the new one, and a crash between two
// scopes' reservations counts a proposal twice: budgets err on the side of admitting less,
// never more.
//
// Each replica remembers the usage and revision it last wrote to a window (and assumes a
// window it has not seen yet is new), so a reservation is one compare-and-set, not a read and
// a write; another replica's write makes it a conflict, and the window is read again.
//
// A repeat offender (a player the ai-worker's input rail flagged often enough for a strike,
// services/ai-worker/budget.Offenders) gets a tighter window while the strike's cool-down lasts: the actor
// limits scaled by the strike's multiplier. The gate reads the actor policies from the
// budget control bucket (read only; package shared/actorpolicy), kept in memory by a watch of their keys.
type rate struct {
	locks    keyLocks // releases
	mu       sync.Mutex
	queues   map[string]*reserveQueue // per key: reservations waiting for the leader (see reserve)
	written  map[string]windowState   // per key: what this replica last wrote (see settle)
	kv       jetstream.KeyValue
	policies *actorpolicy.Watch
	cfg      RateConfig
	now      func() time.Time
}

// Rate is the rate gate's name.
const Rate = events.GateRate

// rateGate declares the rate gate (see Spec).
var rateGate = Spec{
	Name: Rate, New: newRate,
	Summary: "per-actor and global budgets in windows, shared across replicas (KV)",
	// The repeat offenders' actor policies: read and watched only, and only those keys.
	Buckets: []natsauth.Bucket{{Name: natsx.BucketRate}, {Name: natsx.BucketBudget, Keys: actorpolicy.Keys, ReadOnly: true, Watch: true}},
}

func newRate(ctx context.Context, d Deps) (Gate, error) {
	if d.JetStream == nil {
		return nil, errors.New("the rate gate needs JetStream (KV bucket " + natsx.BucketRate + ")")
	}
	kv, err := natsx.AwaitKeyValue(ctx, d.JetStream, natsx.BucketRate, d.Logger)
	if err != nil {
		return nil, fmt.Errorf("%w (provision the topology first)", err)
	}
	control, err := natsx.AwaitKeyValue(ctx, d.JetStream, natsx.BucketBudget, d.Logger)
	if err != nil {
		return nil, fmt.Errorf("%w (provision the topology first)", err)
	}
	// The gate lives as long as its process: so does the watch (ctx bounds only its start).
	var policies *actorpolicy.Watch
	if err := natsx.Await(ctx, "the actor policies of "+natsx.BucketBudget, d.Logger, func(ctx context.Context) (err error) {
		if policies, err = actorpolicy.StartWatch(ctx, control, d.Logger); err != nil {
			// A watch the server refuses goes unanswered: say so rather than wait (NATS
			// permissions from before the watch, deploy/nats).
			if last := d.JetStream.Conn().LastError(); errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(strings.ToLower(last.Error()), strings.ToLower("KV_"+natsx.BucketBudget)) {
				err = fmt.Errorf("%w: %w", err, last)
			}
		}
		return err
	}); err != nil {
		return nil, err
	}
	return &rate{kv: kv, cfg: d.Config.Rate, now: d.Now, policies: policies}, nil
}

func (*rate) Name() string { return Rate }

// usage is one window's consumption; cost in micro-USD so sums are exact.
type usage struct {
	Count      int   `json:"count"`
	CostMicros int64 `json:"costMicros"`
	// Admitted are the admission tokens of the proposals an actor's window took, the latest
	// last: a redelivery found here is not counted again. Global windows keep none.
	Admitted []string `json:"admitted,omitempty"`
}

func (g *rate) budget(kind string) (Budget, bool) {
	if b, ok := g.cfg.Budgets[kind]; ok {
		return b, true
	}
	b, ok := g.cfg.Budgets["*"]
	return b, ok
}

// Check reserves the proposal in its windows: planRate works out what to reserve and
// tallyOf what the reservations answered, without NATS; Check does the KV reads and writes in
// between (reserveAll, release, the admission marker).
func (g *rate) Check(ctx context.Context, p *events.Proposal) (Decision, error) {
	b, ok := g.budget(p.Kind)
	if !ok {
		return Pass(), nil
	}
	pl := planRate(p, b, g.cfg.Window, g.now(), g.policies.Get)
	res := g.reserveAll(ctx, pl.scopes, pl.cost)
	t := tallyOf(pl.scopes, res)
	err := t.err
	if t.redelivery || err != nil || t.refused >= 0 {
		for _, s := range t.taken {
			if rerr := g.release(ctx, s.key, s.token, pl.cost); rerr != nil && err == nil {
				err = rerr
			}
		}
	}
	if t.redelivery && err == nil {
		return Pass(), nil // admitted before in this window: a redelivery
	}
	if err != nil {
		return Decision{}, err
	}
	if t.refused >= 0 {
		if !pl.tracked {
			if before, err := g.admitted(ctx, pl.marker); err != nil {
				return Decision{}, err
			} else if before {
				return Pass(), nil // admitted before the window filled: a redelivery
			}
		}
		return refusal(p, pl, pl.scopes[t.refused], res[t.refused].used), nil
	}
	if pl.tracked || len(t.taken) == 0 {
		return Pass(), nil
	}
	_, err = g.kv.Create(ctx, pl.marker, []byte(strconv.FormatInt(pl.start.Unix(), 10)))
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		// Admitted before: a redelivery. Give back what this delivery reserved.
		for _, s := range t.taken {
			if err := g.release(ctx, s.key, s.token, pl.cost); err != nil {
				return Decision{}, err
			}
		}
	case err != nil:
		return Decision{}, fmt.Errorf("write admission marker: %w", err)
	}
	return Pass(), nil
}

// reserved is one scope's answer from reserve.
type reserved struct {
	tried     bool // reserve was asked (scopes after a refusing one, in turn, are not)
	used      usage
	ok, again bool
	err       error
}

// reserveAll reserves cost in scopes and returns their answers in order: at once, unless the
// first scope, as this replica last wrote it, would refuse or already holds the token (an
// actor at its limit, as in a flood, or a redelivery); then in turn, a later scope only after
// the ones before it admitted, so a refused proposal does not take and give back the rest.
func (g *rate) reserveAll(ctx context.Context, scopes []scope, cost int64) []reserved {
	res := make([]reserved, len(scopes))
	one := func(i int) {
		r, s := &res[i], scopes[i]
		r.tried = true
		r.used, r.ok, r.again, r.err = g.reserve(ctx, s.key, s.token, cost, s.limit)
	}
	if len(scopes) < 2 || g.wouldRefuse(scopes[0], cost) {
		for i := range scopes {
			if one(i); res[i].err != nil || !res[i].ok || res[i].again {
				break
			}
		}
		return res
	}
	var wg sync.WaitGroup
	for i := 1; i < len(scopes); i++ {
		wg.Go(func() { one(i) })
	}
	one(0)
	wg.Wait()
	return res
}

// wouldRefuse reports whether s, as this replica last wrote it, would refuse cost or holds
// s's token already.
func (g *rate) wouldRefuse(s scope, cost int64) bool {
	g.mu.Lock()
	w, ok := g.written[s.key]
	g.mu.Unlock()
	if !ok {
		return false
	}
	if s.token != "" && slices.Contains(w.used.Admitted, s.token) {
		return true
	}
	_, admits := admit(w.used, cost, s.limit)
	return !admits
}

// admitted reports whether the admission marker exists: the proposal passed this gate before.
func (g *rate) admitted(ctx context.Context, marker string) (bool, error) {
	_, err := g.kv.Get(ctx, marker)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	}
	return false, fmt.Errorf("read admission marker: %w", err)
}

// reserve adds one proposal of cost to the window at key if the limit allows, with
// compare-and-set. It returns the usage it saw when refusing. With a token, the window records
// it, and again reports that the window holds it already: admitted before, not counted again.
//
// Concurrent reservations on one key in this process are coalesced: the first starts a leader
// that settles every reservation queued behind it with one compare-and-set (admitting them in
// arrival order against the limit), then the next queued batch, remembering the
// revision it wrote so that it reads the key again only after a conflict. A global window
// takes every proposal of its kind, so one write per proposal would serialise the gate on
// KV round trips (about 150 proposals/s measured by scripts/bench); batching makes it one
// round trip per batch. Replicas still coordinate through compare-and-set alone.
func (g *rate) reserve(ctx context.Context, key, token string, cost int64, l limit) (used usage, ok, again bool, err error) {
	r := &reservation{token: token, cost: cost, limit: l, done: make(chan struct{})}
	g.mu.Lock()
	if g.queues == nil {
		g.queues = map[string]*reserveQueue{}
	}
	q := g.queues[key]
	lead := q == nil
	if lead {
		q = &reserveQueue{}
		g.queues[key] = q
	}
	q.waiting = append(q.waiting, r)
	g.mu.Unlock()
	if lead {
		go g.settle(key, q)
	}
	select {
	case <-r.done:
		return r.used, r.ok, r.again, r.err
	case <-ctx.Done():
		// The leader may still admit it: budgets err on the side of admitting less.
		return usage{}, false, false, ctx.Err()
	}
}

// rateBatchTimeout bounds the KV round trips of one batch of reservations.
const rateBatchTimeout = 10 * time.Second

// reservation is one proposal waiting for its window.
type reservation struct {
	token string
	cost  int64
	limit limit
	used  usage
	ok    bool
	again bool // the window held the token already
	err   error
	done  chan struct{}
}

// reserveQueue holds the reservations of one key waiting for the leader.
type reserveQueue struct{ waiting []*reservation }

// settle is the leader's loop: it takes the queued reservations in batches until none is
// left, then removes the queue so the next reservation starts a leader. It runs on its own
// goroutine, so no proposal waits longer than its own batch.
func (g *rate) settle(key string, q *reserveQueue) {
	// cur and rev are what this replica last wrote to key; a key it never wrote is taken to
	// be new (rev 0: create it). Either guess is checked by the compare-and-set.
	g.mu.Lock()
	last := g.written[key]
	g.mu.Unlock()
	cur, rev, known := last.used, last.rev, true
	defer func() {
		g.mu.Lock()
		if known {
			g.remember(key, windowState{used: cur, rev: rev})
		} else {
			delete(g.written, key)
		}
		g.mu.Unlock()
	}()
	for {
		g.mu.Lock()
		batch := q.waiting
		q.waiting = nil
		if len(batch) == 0 {
			delete(g.queues, key)
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), rateBatchTimeout)
		var err error
		for attempt := 0; ; attempt++ {
			if attempt == 100 {
				err = errors.New("update rate window: too much contention; will retry")
				break
			}
			fresh := !known
			if fresh {
				if cur, rev, err = g.read(ctx, key); err != nil {
					break
				}
				known = true
			}
			next, changed := cur, false
			for _, r := range batch {
				r.again = r.token != "" && slices.Contains(next.Admitted, r.token)
				if r.again {
					r.used, r.ok = next, true
					continue
				}
				u, ok := admit(next, r.cost, r.limit)
				r.ok = ok
				if ok {
					u.Admitted = next.Admitted
					if r.token != "" {
						u = withAdmitted(u, r.token)
					}
					next, changed = u, true
				}
				r.used = next
			}
			if !changed {
				if !fresh {
					known = false // decided on what this replica last wrote: check the window as stored
					continue
				}
				break // every one refused or admitted before: nothing to write
			}
			newRev, werr := g.write(ctx, key, next, rev)
			if werr == nil {
				cur, rev, known = next, newRev, true
				break
			}
			known = false
			if !isConflict(werr) {
				err = fmt.Errorf("update rate window: %w", werr)
				break
			}
		}
		cancel()
		for _, r := range batch {
			if err != nil {
				r.used, r.ok, r.again, r.err = usage{}, false, false, err
			}
			close(r.done)
		}
		if err != nil {
			known = false
		}
	}
}

// windowState is what a replica last wrote to a window: its usage and revision.
type windowState struct {
	used usage
	rev  uint64
}

// maxWrittenWindows bounds what a replica remembers of its windows; past it, it starts again
// empty (a forgotten window costs one conflict and a read).
const maxWrittenWindows = 10000

// remember records what was last written to key; g.mu is held.
func (g *rate) remember(key string, w windowState) {
	if g.written == nil || len(g.written) >= maxWrittenWindows {
		g.written = map[string]windowState{}
	}
	g.written[key] = w
}

// release gives back a reservation when a later scope refused, or the proposal turned out to
// be a redelivery.
func (g *rate) release(ctx context.Context, key, token string, cost int64) error {
	defer g.locks.lock(key)()
	g.mu.Lock()
	delete(g.written, key) // written behind the leader's back: read it again next time
	g.mu.Unlock()
	for range 100 {
		u, rev, err := g.read(ctx, key)
		if err != nil {
			return err
		}
		u.Count = max(u.Count-1, 0)
		u.CostMicros = max(u.CostMicros-cost, 0)
		if token != "" {
			u.Admitted = slices.DeleteFunc(slices.Clone(u.Admitted), func(t string) bool { return t == token })
		}
		if _, err := g.write(ctx, key, u, rev); err == nil {
			return nil
		} else if !isConflict(err) {
			return fmt.Errorf("release rate reservation: %w", err)
		}
	}
	return errors.New("release rate reservation: too much contention")
}

func (g *rate) read(ctx context.Context, key string) (usage, uint64, error) {
	e, err := g.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return usage{}, 0, nil
	}
	if err != nil {
		return usage{}, 0, fmt.Errorf("read rate window: %w", err)
	}
	var u usage
	if err := json.Unmarshal(e.Value(), &u); err != nil {
		return usage{}, 0, fmt.Errorf("rate window %s is unreadable: %w", key, err)
	}
	return u, e.Revision(), nil
}

// write stores u at key if its revision is still rev (0: the key must not exist) and returns
// the new revision.
func (g *rate) write(ctx context.Context, key string, u usage, rev uint64) (uint64, error) {
	data, _ := json.Marshal(u)
	if rev == 0 {
		return g.kv.Create(ctx, key, data)
	}
	return g.kv.Update(ctx, key, data, rev)
}
