package budget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/actorpolicy"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Subject is who and where a call is for; per-actor, per-location and per-region budgets
// keep one window per subject. The agent puts it in the call's context (WithSubject).
type Subject struct {
	Actor    string // e.g. player:ada
	Location string // e.g. loc:tavern
	Region   string
}

type subjectKey struct{}

// WithSubject returns ctx carrying the call's subject.
func WithSubject(ctx context.Context, s Subject) context.Context {
	return context.WithValue(ctx, subjectKey{}, s)
}

// SubjectFrom returns the subject in ctx (zero if none).
func SubjectFrom(ctx context.Context) Subject {
	s, _ := ctx.Value(subjectKey{}).(Subject)
	return s
}

// Buckets are the KV buckets of the ledger: control (budget definitions, operators'
// overrides, actor policies; kept), and the windows, minute and hour windows in a bucket
// whose entries expire after two hours, day and month windows in one that keeps them 33
// days, so that past windows disappear on their own.
type Buckets struct {
	Control, Short, Long jetstream.KeyValue
	JS                   jetstream.JetStream // lists their keys (natsx.ListKeys)
}

// OpenBuckets looks the three buckets up (provisioned by natsx.Provision).
func OpenBuckets(ctx context.Context, js jetstream.JetStream) (Buckets, error) {
	b := Buckets{JS: js}
	var err error
	for name, dst := range map[string]*jetstream.KeyValue{natsx.BucketBudget: &b.Control, natsx.BucketBudgetShort: &b.Short, natsx.BucketBudgetLong: &b.Long} {
		if *dst, err = js.KeyValue(ctx, name); err != nil {
			return Buckets{}, fmt.Errorf("KV bucket %s: %w (provision the topology first)", name, err)
		}
	}
	return b, nil
}

func (b Buckets) window(w Window) jetstream.KeyValue {
	if w == Minute || w == Hour {
		return b.Short
	}
	return b.Long
}

// Ledger reserves, settles and releases budget for LLM calls; it implements llm.Admitter.
// Every replica runs one on the same buckets.
type Ledger struct {
	b       Buckets
	budgets []Budget
	log     *slog.Logger
	m       *Metrics
	now     func() time.Time

	mu       sync.RWMutex
	override map[string]*Override           // by budget name
	actors   map[string]*actorpolicy.Policy // by actor id
	stop     context.CancelFunc
}

// Options configure a Ledger.
type Options struct {
	Metrics *Metrics // may be nil
	Logger  *slog.Logger
	Now     func() time.Time
}

// NewLedger returns a ledger for cfg's budgets and publishes their definitions (so that
// worldgate budget can list them). Call Start before using it.
func NewLedger(ctx context.Context, b Buckets, cfg *Config, o Options) (*Ledger, error) {
	if b.Control == nil || b.Short == nil || b.Long == nil {
		return nil, errors.New("budget: the ledger needs its three KV buckets")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Ledger{b: b, budgets: cfg.Budgets, log: o.Logger, m: o.Metrics, now: o.Now,
		override: map[string]*Override{}, actors: map[string]*actorpolicy.Policy{}}
	for _, bd := range cfg.Budgets {
		raw, _ := json.Marshal(bd)
		if _, err := b.Control.Put(ctx, defKey(bd.Name), raw); err != nil {
			return nil, fmt.Errorf("budget: publish the definition of %s: %w", bd.Name, err)
		}
	}
	return l, nil
}

// OpenLedger returns a ledger for the budgets the ai-workers published (their definitions in
// the control bucket), for a tool that calls models outside the ai-worker — worldgate replay
// and shadow — so that its calls reserve and settle in the same windows, obey the same
// pauses, and count as spend. It publishes nothing. Without published budgets it returns a
// ledger that admits every call. Call Start before using it.
func OpenLedger(ctx context.Context, b Buckets, o Options) (*Ledger, error) {
	if b.Control == nil {
		return nil, errors.New("budget: the ledger needs its three KV buckets")
	}
	keys, err := natsx.ListKeys(ctx, b.JS, b.Control.Bucket(), defPrefix+">")
	if err != nil {
		return nil, fmt.Errorf("budget: list the published budgets: %w", err)
	}
	cfg := &Config{}
	for _, k := range keys {
		e, err := b.Control.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return nil, fmt.Errorf("budget: read %s: %w", k, err)
		}
		var d Budget
		if err := json.Unmarshal(e.Value(), &d); err != nil {
			return nil, fmt.Errorf("budget: the published definition %s is unreadable: %w", k, err)
		}
		cfg.Budgets = append(cfg.Budgets, d)
	}
	l, err := NewLedger(ctx, b, &Config{}, o)
	if err != nil {
		return nil, err
	}
	l.budgets = cfg.Budgets
	return l, nil
}

// Budgets returns the configured budgets.
func (l *Ledger) Budgets() []Budget { return append([]Budget(nil), l.budgets...) }

// Start watches the control keys (overrides, pauses, actor policies) until ctx ends, and
// returns once the current values are loaded: from then on every change reaches this
// replica within the watch's delivery time (milliseconds).
func (l *Ledger) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	w, err := l.b.Control.WatchAll(ctx)
	if err != nil {
		cancel()
		return fmt.Errorf("budget: watch the control keys: %w", err)
	}
	l.stop = cancel
	ready := make(chan struct{})
	go func() {
		defer func() { _ = w.Stop() }()
		loaded := false
		var in natsx.Initial // the nil marker alone can come before every stored key
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil {
					l.apply(e)
				}
				if !loaded && in.Done(e) {
					loaded = true
					close(ready)
				}
			}
		}
	}()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return errors.New("budget: the control keys did not load within 10s")
	}
}

// Close stops the watch.
func (l *Ledger) Close() {
	if l.stop != nil {
		l.stop()
	}
}

func (l *Ledger) apply(e jetstream.KeyValueEntry) {
	key := e.Key()
	deleted := e.Operation() != jetstream.KeyValuePut
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case strings.HasPrefix(key, ctlPrefix):
		name := strings.TrimPrefix(key, ctlPrefix)
		var o Override
		if deleted || json.Unmarshal(e.Value(), &o) != nil {
			delete(l.override, name)
			return
		}
		l.override[name] = &o
		l.log.Info("budget: override applied", "budget", name, "paused", o.Paused, "usd", o.USD, "tokens", o.Tokens, "by", o.By)
	case actorpolicy.IsKey(key):
		var p actorpolicy.Policy
		if deleted || json.Unmarshal(e.Value(), &p) != nil || p.Actor == "" {
			for id := range l.actors {
				if actorpolicy.Key(id) == key {
					delete(l.actors, id)
				}
			}
			return
		}
		l.actors[p.Actor] = &p
	}
}

// matches lists the budgets a call falls under, with the subject id of per-subject ones.
func (l *Ledger) matches(a llm.Admission, s Subject) []match {
	var out []match
	for _, b := range l.budgets {
		id := ""
		switch b.Scope {
		case ScopeGlobal:
		case ScopePurpose:
			if string(a.Purpose) != b.Match {
				continue
			}
		case ScopeModel:
			if b.Match != a.Target.String() && b.Match != a.Target.Provider+":*" {
				continue
			}
		case ScopeActor:
			id = s.Actor
		case ScopeLocation:
			id = s.Location
		case ScopeRegion:
			id = s.Region
		}
		if b.Scope.PerSubject() && (id == "" || b.Match != "" && b.Match != id) {
			continue
		}
		out = append(out, match{b: b, subject: id})
	}
	return out
}

type match struct {
	b       Budget
	subject string
}

// windowKey is the KV key of a budget's current window (and subject).
func windowKey(b Budget, start time.Time, subject string) string {
	k := b.Name + "." + strconv.FormatInt(start.Unix(), 10)
	if subject != "" {
		k += "." + hashID(subject)
	}
	return k
}

func hashID(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:10])
}

// held is one reservation in one window.
type held struct {
	kv  jetstream.KeyValue
	key string
}

// ticket is an admitted call's reservations.
type ticket struct {
	l    *Ledger
	est  Usage
	held []held
	once sync.Once
}

// Admit implements llm.Admitter: it reserves a's estimate in every budget the call falls
// under, or refuses it with an *llm.Error of kind budget_exceeded naming the budget.
func (l *Ledger) Admit(ctx context.Context, a llm.Admission) (llm.Ticket, error) {
	start := l.now()
	s := SubjectFrom(ctx)
	est := Usage{Micros: Micros(a.EstimateUSD), Tokens: int64(a.EstimateTokens())}
	t := &ticket{l: l, est: est}
	for _, m := range l.matches(a, s) {
		lim, paused, degradeAt := l.limitOf(m, start)
		if paused != "" {
			t.abandon(ctx)
			l.m.refused(m.b.Name, RefusedPaused)
			return nil, &llm.Error{Kind: llm.KindBudget, Provider: a.Target.Provider,
				Message: fmt.Sprintf("budget %s is paused (%s); no call is paid for under it", m.b.Name, paused)}
		}
		ws, _ := m.b.Window.Start(start)
		kv := l.b.window(m.b.Window)
		key := windowKey(m.b, ws, m.subject)
		var verdict Verdict
		used, err := update(ctx, kv, key, m.subject, func(u Usage) (Usage, bool) {
			next, v := Reserve(u, est, lim, degradeAt, a.Degradable)
			verdict = v
			return next, v == Admitted
		})
		if err != nil {
			t.abandon(ctx)
			return nil, err
		}
		if verdict != Admitted {
			t.abandon(ctx)
			l.m.refused(m.b.Name, verdict)
			return nil, &llm.Error{Kind: llm.KindBudget, Provider: a.Target.Provider, Message: refusal(m, verdict, used, est, lim, degradeAt, a)}
		}
		t.held = append(t.held, held{kv: kv, key: key})
	}
	l.m.admitted(time.Since(start))
	return t, nil
}

// limitOf is the limit that applies to m now, whether its budget is paused (and why), and
// its degrade threshold.
func (l *Ledger) limitOf(m match, now time.Time) (Limit, string, float64) {
	l.mu.RLock()
	o := l.override[m.b.Name]
	var ap *actorpolicy.Policy
	if m.b.Scope == ScopeActor {
		ap = l.actors[m.subject]
	}
	l.mu.RUnlock()
	paused := ""
	switch {
	case o != nil && o.Paused:
		paused = "paused by " + cmpOr(o.By, "an operator")
	case o != nil && (o.USD != nil && !(*o.USD > 0) || o.Tokens != nil && *o.Tokens <= 0):
		// Kept by a release that read 0 as "no limit"; Apply refuses it now. A limit of 0
		// stops calls rather than letting every one through.
		paused = "limit of 0 set by " + cmpOr(o.By, "an operator") + "; `worldgate budget reset " + m.b.Name + "` restores the file's limit"
	}
	mult := 0.0
	if ap != nil {
		mult = ap.MultiplierAt(now)
		if now.Before(ap.CoolDownUntil) {
			paused = fmt.Sprintf("actor %s cools down until %s: %s", m.subject, ap.CoolDownUntil.UTC().Format(time.RFC3339), cmpOr(ap.Reason, "no reason given"))
		}
	}
	return Effective(m.b.Limit(), o, mult), paused, m.b.DegradeAt
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func refusal(m match, v Verdict, used, est Usage, lim Limit, degradeAt float64, a llm.Admission) string {
	who := "budget " + m.b.Name
	if m.subject != "" {
		who += " of " + m.subject
	}
	state := "is spent"
	if v == RefusedLow {
		state = fmt.Sprintf("is above %.0f%% (a cheaper tier serves the call)", degradeAt*100)
	}
	return fmt.Sprintf("%s (per %s) %s for %s: used $%.6f of $%s and %d of %s tokens; this call needs about $%.6f and %d tokens",
		who, m.b.Window, state, a.Target, USD(used.Micros), limitText(float64(lim.Micros)/1e6, lim.Micros), used.Tokens, limitText(float64(lim.Tokens), lim.Tokens),
		USD(est.Micros), est.Tokens)
}

func limitText(v float64, raw int64) string {
	if raw <= 0 {
		return "unlimited"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Settle implements llm.Ticket.
func (t *ticket) Settle(ctx context.Context, u llm.Usage, costUSD float64) error {
	actual := Usage{Micros: Micros(costUSD), Tokens: int64(u.Total())}
	var err error
	t.once.Do(func() {
		for _, h := range t.held {
			if _, e := update(ctx, h.kv, h.key, "", func(w Usage) (Usage, bool) { return Settle(w, t.est, actual), true }); e != nil && err == nil {
				err = e
			}
		}
		t.l.m.settled("settled", actual)
	})
	return err
}

// Release implements llm.Ticket.
func (t *ticket) Release(ctx context.Context) error {
	var err error
	t.once.Do(func() {
		err = t.release(ctx)
		t.l.m.settled("released", Usage{})
	})
	return err
}

// abandon releases t's reservations on a path that already fails: the caller returns its own
// error, and a failure to release is logged (those reservations count until their window ends).
func (t *ticket) abandon(ctx context.Context) {
	if err := t.release(ctx); err != nil {
		t.l.log.Warn("budget: the reservations of a refused call were not released; they count until their window ends", "err", err)
	}
}

func (t *ticket) release(ctx context.Context) error {
	var err error
	for _, h := range t.held {
		if _, e := update(ctx, h.kv, h.key, "", func(w Usage) (Usage, bool) { return Release(w, t.est), true }); e != nil && err == nil {
			err = e
		}
	}
	t.held = nil
	return err
}

// window is a window's stored value.
type window struct {
	Usage
	Subject string `json:"subject,omitempty"`
}

// update applies f to the window at key with compare-and-set, retrying on conflicts with
// another replica. It returns the usage f saw last.
func update(ctx context.Context, kv jetstream.KeyValue, key, subject string, f func(Usage) (Usage, bool)) (Usage, error) {
	for attempt := 0; attempt < 1000; attempt++ {
		w, rev, err := read(ctx, kv, key)
		if err != nil {
			return Usage{}, err
		}
		next, write := f(w.Usage)
		if !write {
			return w.Usage, nil
		}
		if subject != "" {
			w.Subject = subject
		}
		w.Usage = next
		raw, _ := json.Marshal(w)
		if rev == 0 {
			_, err = kv.Create(ctx, key, raw)
		} else {
			_, err = kv.Update(ctx, key, raw, rev)
		}
		if err == nil {
			return w.Usage, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return Usage{}, fmt.Errorf("budget window %s: %w", key, err)
		}
		if attempt > 2 {
			// Many replicas on one window: spread the retries out.
			t := time.NewTimer(time.Duration(rand.Int64N(int64(time.Millisecond) * int64(min(attempt, 20)))))
			select {
			case <-ctx.Done():
				t.Stop()
				return Usage{}, ctx.Err()
			case <-t.C:
			}
		}
	}
	return Usage{}, fmt.Errorf("budget window %s: too much contention", key)
}

func read(ctx context.Context, kv jetstream.KeyValue, key string) (window, uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return window{}, 0, nil
	}
	if err != nil {
		return window{}, 0, fmt.Errorf("read budget window %s: %w", key, err)
	}
	var w window
	if err := json.Unmarshal(e.Value(), &w); err != nil {
		return window{}, 0, fmt.Errorf("budget window %s is unreadable: %w", key, err)
	}
	return w, e.Revision(), nil
}
