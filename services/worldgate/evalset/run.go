package evalset

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Options tune Run.
type Options struct {
	// Config is the gates' configuration; the zero value is gates.DefaultConfig(), what the
	// gate process runs without flags.
	Config *gates.Config
	Logger *slog.Logger
}

// Verdict is a gate's answer on one case.
type Verdict struct {
	Case    Case     `json:"-"`
	ID      string   `json:"id"`
	Gate    string   `json:"gate"`
	Outcome string   `json:"outcome"`
	For     []string `json:"for,omitempty"` // the categories a rejection names
	Reason  string   `json:"reason,omitempty"`
}

// Right reports whether the verdict is the expected one (for a rejection: for the case's
// category or one it also accepts).
func (v Verdict) Right() bool {
	if v.Outcome != v.Case.Expect {
		return false
	}
	return v.Outcome == Passed || v.Case.Gate == GateDedup || v.namesCategory()
}

func (v Verdict) namesCategory() bool {
	accept := append([]string{v.Case.Category}, v.Case.Accept...)
	return slices.ContainsFunc(v.For, func(c string) bool { return slices.Contains(accept, c) })
}

// Run checks every case of the set with the real gates and returns the verdicts, in the set's
// order.
func Run(ctx context.Context, s *Set, o Options) ([]Verdict, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := gates.DefaultConfig()
	if o.Config != nil {
		cfg = *o.Config
	}
	// The evaluation world is loaded before any check: nothing is in flight, so a missing
	// reference is missing for good and waiting for it (ReferenceWait) only costs time.
	cfg.Invariant.ReferenceWait = -1
	p, err := startParts(ctx, s.World, log)
	if err != nil {
		return nil, fmt.Errorf("start the gates' parts: %w", err)
	}
	defer p.close()
	var now time.Time
	deps := gates.Deps{Graph: p.reader, JetStream: p.js, Classify: p.mcp, Config: cfg,
		Registerer: prometheus.NewRegistry(), Logger: log, Now: func() time.Time { return now }}
	built := map[string]gates.Gate{}
	reg := gates.Builtin()
	for _, name := range []string{GateInvariant, GateDedup, GateSafety} {
		spec, ok := reg.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("gate %s is not in the registry", name)
		}
		if built[name], err = spec.New(ctx, deps); err != nil {
			return nil, fmt.Errorf("gate %s: %w", name, err)
		}
	}
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	out := make([]Verdict, 0, len(s.Cases))
	for _, c := range s.Cases {
		g := built[c.Gate]
		if c.Gate == GateDedup {
			// Each dedup case starts from an empty bucket, then the gate accepts what came before.
			if err := purge(ctx, p); err != nil {
				return nil, err
			}
			for i, b := range c.Before {
				now = base.Add(-time.Duration(b.AgoMinutes) * time.Minute)
				d, err := g.Check(ctx, newProposal(fmt.Sprintf("%s-before-%d", c.ID, i), c.Kind, b.Payload, now))
				if err != nil {
					return nil, fmt.Errorf("%s: before[%d]: %w", c.ID, i, err)
				}
				if d.Outcome != gates.Passed {
					return nil, fmt.Errorf("%s: before[%d] was not accepted (%s: %s): the case must list content the gate accepts", c.ID, i, d.Outcome, d.Reason)
				}
			}
		}
		now = base
		d, err := g.Check(ctx, newProposal(c.ID, c.Kind, c.Payload, now))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.ID, err)
		}
		v := Verdict{Case: c, ID: c.ID, Gate: c.Gate, Outcome: Passed}
		if d.Outcome == gates.Rejected {
			v.Outcome, v.Reason = Rejected, d.Reason
			v.For = rejectedFor(c.Gate, d.Details)
		} else if d.Outcome != gates.Passed {
			return nil, fmt.Errorf("%s: the %s gate answered %s", c.ID, c.Gate, d.Outcome)
		}
		out = append(out, v)
	}
	return out, nil
}

func purge(ctx context.Context, p *parts) error {
	all, err := natsx.ListKeys(ctx, p.js, natsx.BucketDedup)
	if err != nil {
		return err
	}
	for _, k := range all {
		if err := p.dedupKV.Purge(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// invariantRules name the invariant gate's rules by the sentences its violations are written in.
// A sentence none of them matches is "unrecognised", which is never right: rewording a rule
// without updating this table fails the evaluation instead of silently mis-scoring it.
var invariantRules = []struct {
	category string
	re       *regexp.Regexp
}{
	{"unknown_faction", regexp.MustCompile(`^The faction \S+ does not exist\.`)},
	{"missing_entity", regexp.MustCompile(`^The \S+ \S+ does not exist\.`)},
	{"already_exists", regexp.MustCompile(`already exists`)},
	{"self_loop", regexp.MustCompile(`would lead back to itself`)},
	{"duplicate_exit", regexp.MustCompile(`already has an exit`)},
	{"npc_not_there", regexp.MustCompile(`cannot be spoken to there`)},
	{"player_not_there", regexp.MustCompile(`^The player \S+ is (nowhere|at .*), not at \S+\.$`)},
	{"no_such_exit", regexp.MustCompile(`has no exit|^The exit \S+ of \S+ leads to \S+, not \S+\.$`)},
}

// Unrecognised names a rejection whose reason the evaluation cannot attribute.
const Unrecognised = "unrecognised"

// rejectedFor names the categories a gate's rejection gives.
func rejectedFor(gate string, details map[string]any) []string {
	var out []string
	switch gate {
	case GateInvariant:
		for _, s := range stringsOf(details["violations"]) {
			cat := Unrecognised
			for _, r := range invariantRules {
				if r.re.MatchString(s) {
					cat = r.category
					break
				}
			}
			out = append(out, cat)
		}
	case GateDedup:
		out = []string{"near_duplicate"}
	case GateSafety:
		for _, c := range stringsOf(details["categories"]) {
			if c == gates.CategoryMarkup {
				c = "markup_injection" // the gate's own markup check; the moderation set's name for it
			}
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = []string{Unrecognised}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func stringsOf(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}
