package budget_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/shared/llm"
)

// A limit is positive: setting 0 (or less), or lowering a limit to 0 or below, is refused with
// a sentence pointing at pause, and changes nothing; the budget keeps refusing what it
// refused. Before, a limit of 0 meant "no limit": `set -usd 0` made the budget unlimited.
func TestNonPositiveLimitsAreRefused(t *testing.T) {
	e := provisioned(t)
	cfg := &budget.Config{Budgets: []budget.Budget{{Name: "global-day", Scope: budget.ScopeGlobal, Window: budget.Day, USD: 0.00001, Tokens: 1000}}}
	r := newReplica(t, e, cfg, cheapOnly())
	ctx := context.Background()
	zero, minusOne, minusTwo := 0.0, -1.0, int64(-2000)
	zeroTokens := int64(0)
	for _, c := range []struct {
		name string
		ch   budget.Change
	}{
		{"set usd 0", budget.Change{SetUSD: &zero}},
		{"set usd -1", budget.Change{SetUSD: &minusOne}},
		{"set tokens 0", budget.Change{SetTokens: &zeroTokens}},
		{"raise usd -1", budget.Change{RaiseUSD: &minusOne}},
		{"raise tokens -2000", budget.Change{RaiseTokens: &minusTwo}},
	} {
		o, err := budget.Apply(ctx, r.b.Control, "global-day", c.ch)
		if err == nil || !strings.Contains(err.Error(), "budget pause") {
			t.Errorf("%s: want an error pointing at pause, got %v (override %+v)", c.name, err, o)
		}
	}
	reports, err := budget.Reports(ctx, r.b, time.Now(), "")
	if err != nil || len(reports) != 1 {
		t.Fatal(err, reports)
	}
	if reports[0].Override != nil {
		t.Fatalf("a refused change was kept: %+v", reports[0].Override)
	}
	// The file's limit still refuses the call (it needs more than $0.00001).
	if _, err := r.reg.Complete(ctx, ask(llm.Purpose("ambience"), 200)); llm.KindOf(err) != llm.KindBudget {
		t.Fatalf("the budget no longer refuses: %v", err)
	}
	// A raise that leaves a positive limit is fine.
	small := 1.0
	if o, err := budget.Apply(ctx, r.b.Control, "global-day", budget.Change{RaiseUSD: &small}); err != nil || o.USD == nil || *o.USD <= 1 {
		t.Fatalf("raise by $1: %v %+v", err, o)
	}
}

// An override of 0 that an older release kept (it meant "no limit") is a hard stop now: the
// budget refuses every call, as if paused, and never turns unlimited.
func TestAStoredZeroLimitStopsCalls(t *testing.T) {
	e := provisioned(t)
	cfg := &budget.Config{Budgets: []budget.Budget{{Name: "global-day", Scope: budget.ScopeGlobal, Window: budget.Day, USD: 100}}}
	r := newReplica(t, e, cfg, cheapOnly())
	ctx := context.Background()
	if _, err := r.reg.Complete(ctx, ask(llm.Purpose("ambience"), 50)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.b.Control.Put(ctx, "ctl.global-day", []byte(`{"usd":0,"by":"an older worldgate","at":"2026-11-01T00:00:00Z"}`)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := r.reg.Complete(ctx, ask(llm.Purpose("ambience"), 50))
		if llm.KindOf(err) == llm.KindBudget {
			if !strings.Contains(err.Error(), "limit of 0") {
				t.Fatalf("the refusal should say why: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a stored limit of 0 still lets calls through after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
