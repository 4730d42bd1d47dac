package budget

import (
	"context"
	"sort"
	"time"

	"github.com/worldgate/worldgate/shared/actorpolicy"
	"github.com/worldgate/worldgate/shared/natsx"
)

// SubjectUsage is one subject's (actor's, location's or region's) current window of a
// per-subject budget, measured against that subject's own limit (an actor policy may tighten
// it).
type SubjectUsage struct {
	Subject string              `json:"subject"`
	Used    Usage               `json:"used"`
	Limit   Limit               `json:"limit"`
	Ratio   float64             `json:"ratio"`
	Policy  *actorpolicy.Policy `json:"policy,omitempty"`
}

// Subjects lists the subjects with a window in per-subject budget r's current window, the
// fullest first, at most n of them (n ≤ 0: all). It is what worldgate budget shows per actor;
// the metrics only count them (never an id as a label).
func Subjects(ctx context.Context, b Buckets, r Report, now time.Time, n int) ([]SubjectUsage, error) {
	if !r.Budget.Scope.PerSubject() {
		return nil, nil
	}
	kv := b.window(r.Budget.Window)
	keys, err := natsx.ListKeys(ctx, b.JS, kv.Bucket(), windowKey(r.Budget, r.Window, "")+".*")
	if err != nil {
		return nil, err
	}
	var out []SubjectUsage
	for _, k := range keys {
		w, _, err := read(ctx, kv, k)
		if err != nil || w.Subject == "" {
			continue
		}
		s := SubjectUsage{Subject: w.Subject, Used: w.Usage, Limit: Effective(r.Budget.Limit(), r.Override, 0)}
		if r.Budget.Scope == ScopeActor {
			if p, err := actorpolicy.Get(ctx, b.Control, w.Subject); err == nil && p != nil {
				s.Policy = p
				s.Limit = Effective(r.Budget.Limit(), r.Override, p.MultiplierAt(now))
			}
		}
		s.Ratio = Ratio(s.Used, s.Limit)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Ratio != out[j].Ratio {
			return out[i].Ratio > out[j].Ratio
		}
		return out[i].Subject < out[j].Subject
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}
