package budget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/actorpolicy"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Control keys of the control bucket (the actor policies' are package shared/actorpolicy's).
const (
	defPrefix = "def."
	ctlPrefix = "ctl."
)

func defKey(name string) string { return defPrefix + name }
func ctlKey(name string) string { return ctlPrefix + name }

// DefinitionKeys and OffenceKeys are the control keys the ai-worker writes besides actor
// policies: the budgets' definitions it runs with, and players' offences (NATS permissions
// keep it from the operators' ctl.* overrides).
const (
	DefinitionKeys = defPrefix + ">"
	OffenceKeys    = offencePrefix + ">"
)

// Override is an operator's runtime change to a budget, kept in the control bucket until
// removed: a new limit (replacing the file's), or a pause (the kill switch: no call under
// the budget is paid for; the game gets static fallback content).
type Override struct {
	USD    *float64  `json:"usd,omitempty"`
	Tokens *int64    `json:"tokens,omitempty"`
	Paused bool      `json:"paused,omitempty"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
}

// Change is an operator's change to one budget.
type Change struct {
	// SetUSD / SetTokens replace the limit; RaiseUSD / RaiseTokens add to the limit in
	// force (the override's, else the file's).
	SetUSD, RaiseUSD       *float64
	SetTokens, RaiseTokens *int64
	Pause, Resume          bool
	// Reset removes the override altogether.
	Reset bool
	By    string
}

// Apply changes budget name's override with compare-and-set (two operators at once do not
// lose a change) and returns the override now in force (nil after a reset).
func Apply(ctx context.Context, control jetstream.KeyValue, name string, c Change) (*Override, error) {
	e, err := control.Get(ctx, defKey(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("no budget is called %q (worldgate budget lists them)", name)
	}
	if err != nil {
		return nil, err
	}
	var def Budget
	if err := json.Unmarshal(e.Value(), &def); err != nil {
		return nil, fmt.Errorf("budget %s: unreadable definition: %w", name, err)
	}
	if c.Reset {
		if err := control.Delete(ctx, ctlKey(name)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, err
		}
		return nil, nil
	}
	for range 100 {
		var o Override
		var rev uint64
		cur, err := control.Get(ctx, ctlKey(name))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, err
		default:
			rev = cur.Revision()
			if err := json.Unmarshal(cur.Value(), &o); err != nil {
				o = Override{}
			}
		}
		if c.SetUSD != nil {
			o.USD = ptr(*c.SetUSD)
		}
		if c.SetTokens != nil {
			o.Tokens = ptr(*c.SetTokens)
		}
		if c.RaiseUSD != nil {
			base := def.USD
			if o.USD != nil {
				base = *o.USD
			}
			o.USD = ptr(base + *c.RaiseUSD)
		}
		if c.RaiseTokens != nil {
			base := def.Tokens
			if o.Tokens != nil {
				base = *o.Tokens
			}
			o.Tokens = ptr(base + *c.RaiseTokens)
		}
		if err := positiveLimits(name, c, o); err != nil {
			return nil, err
		}
		if c.Pause {
			o.Paused = true
		}
		if c.Resume {
			o.Paused = false
		}
		o.By, o.At = c.By, time.Now().UTC()
		raw, _ := json.Marshal(o)
		if rev == 0 {
			_, err = control.Create(ctx, ctlKey(name), raw)
		} else {
			_, err = control.Update(ctx, ctlKey(name), raw, rev)
		}
		if err == nil {
			return &o, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return nil, err
		}
	}
	return nil, errors.New("too many concurrent changes to the budget; try again")
}

func ptr[T any](v T) *T { return &v }

// positiveLimits refuses a change that would leave a limit of zero or less. A limit is an
// amount per window; "no call is paid for" is a pause, which says so everywhere (and, unlike
// a limit of 0, which the file format reads as "no limit", can never be mistaken for one).
func positiveLimits(name string, c Change, o Override) error {
	const stop = "to stop paying for calls under it, use `worldgate budget pause %s` (budget.Change{Pause: true}); `budget reset` restores the file's limit"
	switch {
	case (c.SetUSD != nil || c.RaiseUSD != nil) && o.USD != nil && !(*o.USD > 0):
		return fmt.Errorf("a USD limit must be more than $0, and this change leaves $%s; "+stop,
			strconv.FormatFloat(*o.USD, 'f', -1, 64), name)
	case (c.SetTokens != nil || c.RaiseTokens != nil) && o.Tokens != nil && *o.Tokens <= 0:
		return fmt.Errorf("a token limit must be more than 0, and this change leaves %d; "+stop, *o.Tokens, name)
	}
	return nil
}

// Report is one budget's state for worldgate budget and the metrics.
type Report struct {
	Budget   Budget    `json:"budget"`
	Override *Override `json:"override,omitempty"`
	Limit    Limit     `json:"limit"` // in force
	Window   time.Time `json:"windowStart"`
	Ends     time.Time `json:"windowEnd"`
	// Used is the current window (a subject's when Subject is set; for a per-subject budget
	// without one, the largest subject's).
	Used    Usage   `json:"used"`
	Ratio   float64 `json:"ratio"`
	Subject string  `json:"subject,omitempty"`
	// Subjects and Above80 count the subjects with a window now, and those above 80 % of
	// their limit (per-subject budgets).
	Subjects int `json:"subjects,omitempty"`
	Above80  int `json:"above80,omitempty"`
}

// Reports reads every budget's definition, override and current window. subject (an
// actor, location or region id) selects that subject's windows of the per-subject budgets.
func Reports(ctx context.Context, b Buckets, now time.Time, subject string) ([]Report, error) {
	keys, err := natsx.ListKeys(ctx, b.JS, b.Control.Bucket(), defPrefix+">")
	if err != nil {
		return nil, err
	}
	var defs []Budget
	for _, k := range keys {
		e, err := b.Control.Get(ctx, k)
		if err != nil {
			continue
		}
		var d Budget
		if json.Unmarshal(e.Value(), &d) == nil {
			defs = append(defs, d)
		}
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	out := make([]Report, 0, len(defs))
	for _, d := range defs {
		r := Report{Budget: d}
		if e, err := b.Control.Get(ctx, ctlKey(d.Name)); err == nil {
			var o Override
			if json.Unmarshal(e.Value(), &o) == nil {
				r.Override = &o
			}
		}
		r.Limit = Effective(d.Limit(), r.Override, 0)
		r.Window, r.Ends = d.Window.Start(now)
		kv := b.window(d.Window)
		switch {
		case !d.Scope.PerSubject():
			w, _, err := read(ctx, kv, windowKey(d, r.Window, ""))
			if err != nil {
				return nil, err
			}
			r.Used = w.Usage
		case subject != "":
			r.Subject = subject
			if d.Scope == ScopeActor {
				if p, err := actorpolicy.Get(ctx, b.Control, subject); err == nil && p != nil {
					r.Limit = Effective(d.Limit(), r.Override, p.MultiplierAt(now))
				}
			}
			w, _, err := read(ctx, kv, windowKey(d, r.Window, subject))
			if err != nil {
				return nil, err
			}
			r.Used = w.Usage
		default:
			prefix := windowKey(d, r.Window, "") + "."
			keys, err := natsx.ListKeys(ctx, b.JS, kv.Bucket(), prefix+"*")
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				w, _, err := read(ctx, kv, k)
				if err != nil {
					continue
				}
				r.Subjects++
				lim := r.Limit
				if d.Scope == ScopeActor && w.Subject != "" {
					// A repeat offender is measured against its own, tighter limit.
					if p, err := actorpolicy.Get(ctx, b.Control, w.Subject); err == nil && p != nil {
						lim = Effective(d.Limit(), r.Override, p.MultiplierAt(now))
					}
				}
				ratio := Ratio(w.Usage, lim)
				if ratio > 0.8 {
					r.Above80++
				}
				if ratio >= r.Ratio {
					r.Used, r.Subject, r.Ratio = w.Usage, w.Subject, ratio
				}
			}
		}
		if !d.Scope.PerSubject() || subject != "" {
			r.Ratio = Ratio(r.Used, r.Limit)
		}
		out = append(out, r)
	}
	return out, nil
}

// Describe is a budget's scope in words (for the CLI).
func (b Budget) Describe() string {
	switch b.Scope {
	case ScopeGlobal:
		return "every call"
	case ScopePurpose:
		return "purpose " + b.Match
	case ScopeModel:
		return "target " + b.Match
	}
	if b.Match != "" {
		return string(b.Scope) + " " + b.Match
	}
	return "each " + string(b.Scope)
}

// paused says whether an override pauses its budget (for the CLI).
func (r Report) Paused() bool { return r.Override != nil && r.Override.Paused }
