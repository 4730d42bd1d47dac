package gates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// maxAdmitted bounds an actor window's admission tokens; a redelivery of a proposal older than
// the last maxAdmitted of its actor's window is counted again (admitting less, never more).
const maxAdmitted = 256

// withAdmitted is u with token added to its admission tokens (in a new slice), the oldest
// dropped past maxAdmitted.
func withAdmitted(u usage, token string) usage {
	keep := u.Admitted[max(0, len(u.Admitted)-maxAdmitted+1):]
	u.Admitted = append(slices.Clip(keep), token)
	return u
}

// limit is one scope's budget; zero fields are unlimited.
type limit struct {
	Count      int
	CostMicros int64
}

func (l limit) unlimited() bool { return l.Count <= 0 && l.CostMicros <= 0 }

// admit is the pure budget rule: whether one more proposal costing cost fits, and the usage
// after it.
func admit(u usage, cost int64, l limit) (usage, bool) {
	next := usage{Count: u.Count + 1, CostMicros: u.CostMicros + cost}
	if l.Count > 0 && next.Count > l.Count {
		return u, false
	}
	if l.CostMicros > 0 && next.CostMicros > l.CostMicros {
		return u, false
	}
	return next, true
}

// windowOf is the fixed window now falls in: its start and the seconds until it ends.
func windowOf(now time.Time, size time.Duration) (start time.Time, retryAfter float64) {
	start = now.Truncate(size)
	return start, math.Ceil(start.Add(size).Sub(now).Seconds())
}

func micros(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

func hashKey(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:12])
}

func (g *rate) budget(kind string) (Budget, bool) {
	if b, ok := g.cfg.Budgets[kind]; ok {
		return b, true
	}
	b, ok := g.cfg.Budgets["*"]
	return b, ok
}

func (g *rate) Check(ctx context.Context, p *events.Proposal) (Decision, error) {
	b, ok := g.budget(p.Kind)
	if !ok {
		return Pass(), nil
	}
	token := hashKey(p.ProposalID + ":" + strconv.Itoa(p.Attempt))
	marker := "admitted." + token
	var cost int64
	if p.Provenance != nil {
		cost = micros(p.Provenance.CostUSD)
	}
	start, retryAfter := windowOf(g.now(), g.cfg.Window)
	win := strconv.FormatInt(start.Unix(), 10)
	who := budgetHolder(p)
	actorLimit := limit{b.ActorCount, micros(b.ActorCostUSD)}
	var tightened *actorpolicy.Policy
	if !actorLimit.unlimited() {
		pol := g.policies.Get(who)
		if l, ok := tighten(actorLimit, pol, g.now()); ok {
			actorLimit, tightened = l, pol
		}
	}
	actor := scope{name: "actor", key: p.Kind + ".actor." + hashKey(who) + "." + win, limit: actorLimit}
	global := scope{name: "global", key: p.Kind + ".global." + win, limit: limit{b.GlobalCount, micros(b.GlobalCostUSD)}}
	// The actor's window records the proposals it admits; without one, the marker does.
	tracked := !actor.limit.unlimited()
	if tracked {
		actor.token = token
	}
	// The scopes are reserved at once, not one after the other: each is a KV round trip (the
	// global one waits for the batch in flight), and a move waited for both in turn. A scope
	// reserved for a proposal another scope refused, or found to be a redelivery, is given
	// back; until then it holds one more than it should, which errs on admitting less.
	var scopes []scope
	for _, s := range []scope{actor, global} {
		if !s.limit.unlimited() {
			scopes = append(scopes, s)
		}
	}
	res := g.reserveAll(ctx, scopes, cost)
	var taken []scope
	redelivery := false
	for i, r := range res {
		if r.tried && r.err == nil && r.ok && !r.again {
			taken = append(taken, scopes[i])
		}
		redelivery = redelivery || r.again
	}
	refused := -1
	var err error
	for i, r := range res {
		if r.err != nil && err == nil {
			err = r.err
		}
		if r.tried && r.err == nil && !r.ok && refused < 0 {
			refused = i
		}
	}
	if redelivery || err != nil || refused >= 0 {
		for _, t := range taken {
			if rerr := g.release(ctx, t.key, t.token, cost); rerr != nil && err == nil {
				err = rerr
			}
		}
	}
	if redelivery && err == nil {
		return Pass(), nil // admitted before in this window: a redelivery
	}
	if err != nil {
		return Decision{}, err
	}
	if refused >= 0 {
		s, used := scopes[refused], res[refused].used
		if !tracked {
			if before, err := g.admitted(ctx, marker); err != nil {
				return Decision{}, err
			} else if before {
				return Pass(), nil // admitted before the window filled: a redelivery
			}
		}
		who, why := "the global", ""
		details := map[string]any{"scope": s.name, "window": g.cfg.Window.String(), "windowStart": start.UTC(), "count": used.Count, "costUsd": float64(used.CostMicros) / 1e6,
			"limitCount": s.limit.Count, "limitCostUsd": float64(s.limit.CostMicros) / 1e6}
		if s.name == "actor" {
			who = budgetHolder(p) + "'s"
			if tightened != nil {
				why = fmt.Sprintf(", tightened ×%g for a repeat offender until %s", tightened.Multiplier, tightened.CoolDownUntil.UTC().Format(time.RFC3339))
				details["offender"] = map[string]any{"multiplier": tightened.Multiplier, "coolDownUntil": tightened.CoolDownUntil.UTC(), "strikes": tightened.Strikes}
			}
		}
		return RejectTransient(events.CodeRateLimited,
			fmt.Sprintf("%s budget for %s proposals is spent for this %s window (%s%s): try again in %.0f s.", capitalize(who), p.Kind, g.cfg.Window, usedText(used, s.limit), why, retryAfter),
			details, retryAfter), nil
	}
	if tracked || len(taken) == 0 {
		return Pass(), nil
	}
	_, err = g.kv.Create(ctx, marker, []byte(strconv.FormatInt(start.Unix(), 10)))
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		// Admitted before: a redelivery. Give back what this delivery reserved.
		for _, t := range taken {
			if err := g.release(ctx, t.key, t.token, cost); err != nil {
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

// tighten is the pure rule for a repeat offender: while the actor policy's cool-down lasts,
// the actor's limits are scaled by its multiplier (never below one proposal or one micro-USD);
// it reports whether it changed anything.
func tighten(l limit, p *actorpolicy.Policy, now time.Time) (limit, bool) {
	if p == nil || !now.Before(p.CoolDownUntil) || !(p.Multiplier > 0 && p.Multiplier < 1) {
		return l, false
	}
	if l.Count > 0 {
		l.Count = max(1, int(math.Floor(float64(l.Count)*p.Multiplier)))
	}
	if l.CostMicros > 0 {
		l.CostMicros = max(1, int64(math.Floor(float64(l.CostMicros)*p.Multiplier)))
	}
	return l, true
}

// budgetHolder is whose budget a proposal draws on: the player its payload names, else its
// actor. A player's budget is one whatever actor id the proposal claims.
func budgetHolder(p *events.Proposal) string {
	var named struct {
		PlayerID string `json:"playerId"`
	}
	if json.Unmarshal(p.Payload, &named) == nil && named.PlayerID != "" {
		return "player:" + strings.TrimPrefix(named.PlayerID, "player:")
	}
	if p.Actor.Kind == "player" {
		return "player:" + strings.TrimPrefix(p.Actor.ID, "player:")
	}
	return p.Actor.Kind + ":" + p.Actor.ID
}

type scope struct {
	name  string
	key   string
	limit limit
	token string // the admission token the window records ("": none)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func usedText(u usage, l limit) string {
	if l.Count > 0 && u.Count+1 > l.Count {
		return fmt.Sprintf("%d of %d proposals used", u.Count, l.Count)
	}
	return fmt.Sprintf("$%.4f of $%.4f used", float64(u.CostMicros)/1e6, float64(l.CostMicros)/1e6)
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
