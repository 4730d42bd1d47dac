package budget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/actorpolicy"
)

// Repeat offenders: the ai-worker's input rail reports each player whose words were flagged
// (a blocked category or prompt injection, agent.RailConfig.OnFlag). Offenders counts those
// flags per player in the control bucket (compare-and-set, so every replica counts into one
// record); the Threshold-th flag within Window is a strike, and a strike sets the player's
// actor policy (actorpolicy.Policy): their per-actor budgets scaled by Multiplier (squared at the second strike, and
// so on, never below MinMultiplier), no paid call at all for CoolDown, and the tighter limits
// decaying back to the file's over Decay. Every ledger applies the policy within a second;
// worldgate budget lists it.

// OffenderPolicy configures how repeat offenders are tightened.
type OffenderPolicy struct {
	// Threshold flags within Window make a strike (default 3 within 1h).
	Threshold int
	Window    time.Duration
	// Multiplier scales the per-actor limits at the first strike (default 0.5); strike k
	// scales them by Multiplier^k, never below MinMultiplier (default 0.1).
	Multiplier, MinMultiplier float64
	// CoolDown: no paid call for the player for this long after a strike (default 2m).
	CoolDown time.Duration
	// Decay: the tighter limits return linearly to the file's over this long after the strike
	// (default 24h); a strike after the decay starts again from the first.
	Decay time.Duration
}

func (p OffenderPolicy) withDefaults() OffenderPolicy {
	if p.Threshold <= 0 {
		p.Threshold = 3
	}
	if p.Window <= 0 {
		p.Window = time.Hour
	}
	if !(p.Multiplier > 0 && p.Multiplier < 1) {
		p.Multiplier = 0.5
	}
	if !(p.MinMultiplier > 0 && p.MinMultiplier <= p.Multiplier) {
		p.MinMultiplier = min(0.1, p.Multiplier)
	}
	if p.CoolDown <= 0 {
		p.CoolDown = 2 * time.Minute
	}
	if p.Decay <= 0 {
		p.Decay = 24 * time.Hour
	}
	return p
}

const offencePrefix = "offence."

func offenceKey(actor string) string { return offencePrefix + hashID(actor) }

// Offences is one player's record of flags in the control bucket.
type Offences struct {
	Actor string `json:"actor"`
	// Flags are the times of the flags that still count (within the window, since the last
	// strike), oldest first.
	Flags      []time.Time `json:"flags,omitempty"`
	Categories []string    `json:"categories,omitempty"`
	Strikes    int         `json:"strikes,omitempty"`
	LastStrike time.Time   `json:"lastStrike,omitzero"`
}

// Record is the pure rule: the record after a flag at now, and whether it is a strike.
func (p OffenderPolicy) Record(o Offences, now time.Time, categories []string) (Offences, bool) {
	p = p.withDefaults()
	kept := o.Flags[:0:0]
	for _, f := range o.Flags {
		if now.Sub(f) < p.Window {
			kept = append(kept, f)
		}
	}
	o.Flags = append(kept, now)
	for _, c := range categories {
		if !slices.Contains(o.Categories, c) {
			o.Categories = append(o.Categories, c)
		}
	}
	sort.Strings(o.Categories)
	if len(o.Flags) < p.Threshold {
		return o, false
	}
	if o.LastStrike.IsZero() || now.Sub(o.LastStrike) >= p.Decay {
		o.Strikes = 0 // the last strike has decayed: start again
	}
	o.Strikes++
	o.LastStrike = now
	o.Flags = nil
	return o, true
}

// Policy is the actor policy a strike sets.
func (p OffenderPolicy) Policy(o Offences, now time.Time) actorpolicy.Policy {
	p = p.withDefaults()
	m := max(math.Pow(p.Multiplier, float64(max(o.Strikes, 1))), p.MinMultiplier)
	return actorpolicy.Policy{Actor: o.Actor, Multiplier: m, CoolDownUntil: now.Add(p.CoolDown).UTC(), DecayUntil: now.Add(p.Decay).UTC(),
		Reason:  fmt.Sprintf("repeat offender: strike %d, %d flagged utterances within %s (%s)", o.Strikes, p.Threshold, p.Window, strings.Join(o.Categories, ", ")),
		Strikes: o.Strikes, At: now.UTC()}
}

// Offenders counts the input rail's flags per player and tightens repeat offenders' budgets.
type Offenders struct {
	control jetstream.KeyValue
	p       OffenderPolicy
	log     *slog.Logger
	now     func() time.Time
	flags   *prometheus.CounterVec
	strikes prometheus.Counter
}

// offenceCategories bounds the category label (the input rail's categories).
var offenceCategories = []string{"harassment", "threat", "hate", "sexual", "self_harm", "violence_extreme", "markup_injection", "prompt_injection"}

// NewOffenders returns the repeat-offender counter on the control bucket. reg (may be nil)
// receives worldgate_budget_offence_flags_total{category} and
// worldgate_budget_offender_strikes_total.
func NewOffenders(control jetstream.KeyValue, p OffenderPolicy, reg prometheus.Registerer, log *slog.Logger, now func() time.Time) (*Offenders, error) {
	if control == nil {
		return nil, errors.New("budget: offenders need the control bucket")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	o := &Offenders{control: control, p: p.withDefaults(), log: log, now: now,
		flags: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "worldgate", Name: "budget_offence_flags_total",
			Help: "Players' utterances the input rail flagged (a blocked category or prompt injection), counted towards repeat-offender strikes, by category."}, []string{"category"}),
		strikes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "worldgate", Name: "budget_offender_strikes_total",
			Help: "Repeat-offender strikes: a player flagged the threshold number of times within the window had their per-actor budgets tightened and a cool-down."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{o.flags, o.strikes} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("budget: register offender metrics: %w", err)
			}
		}
	}
	return o, nil
}

// Flag records one flagged utterance of actor and, at a strike, sets the actor's policy. It
// returns the policy set (nil when the flag was not a strike).
func (o *Offenders) Flag(ctx context.Context, actor string, categories []string) (*actorpolicy.Policy, error) {
	if actor == "" {
		return nil, errors.New("budget: a flag needs the player's id")
	}
	for _, c := range categories {
		if !slices.Contains(offenceCategories, c) {
			c = "other"
		}
		o.flags.WithLabelValues(c).Inc()
	}
	key := offenceKey(actor)
	for range 100 {
		now := o.now()
		var rec Offences
		var rev uint64
		e, err := o.control.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, err
		default:
			rev = e.Revision()
			if json.Unmarshal(e.Value(), &rec) != nil {
				rec = Offences{}
			}
		}
		rec.Actor = actor
		next, strike := o.p.Record(rec, now, categories)
		raw, _ := json.Marshal(next)
		if rev == 0 {
			_, err = o.control.Create(ctx, key, raw)
		} else {
			_, err = o.control.Update(ctx, key, raw, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // another replica counted a flag of the same player meanwhile
		}
		if err != nil {
			return nil, err
		}
		if !strike {
			return nil, nil
		}
		p := o.p.Policy(next, now)
		if err := actorpolicy.Set(ctx, o.control, p); err != nil {
			return nil, err
		}
		o.strikes.Inc()
		o.log.Warn("Budget.RepeatOffender", "actor", actor, "strike", p.Strikes, "multiplier", p.Multiplier,
			"coolDownUntil", p.CoolDownUntil, "decayUntil", p.DecayUntil, "categories", next.Categories)
		return &p, nil
	}
	return nil, errors.New("budget: too many concurrent flags for one player")
}

// OnFlag is Flag as the input rail's hook (agent.RailConfig.OnFlag): bounded in time, errors
// logged (a flag that cannot be counted never holds up the player's request).
func (o *Offenders) OnFlag(ctx context.Context, actor string, categories []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if _, err := o.Flag(ctx, actor, categories); err != nil {
		o.log.Warn("budget: cannot count a repeat-offender flag", "error", err)
	}
}

// GetOffences reads a player's record (nil when none).
func GetOffences(ctx context.Context, control jetstream.KeyValue, actor string) (*Offences, error) {
	e, err := control.Get(ctx, offenceKey(actor))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var o Offences
	if err := json.Unmarshal(e.Value(), &o); err != nil {
		return nil, err
	}
	return &o, nil
}
