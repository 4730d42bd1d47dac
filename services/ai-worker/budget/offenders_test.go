package budget_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/shared/actorpolicy"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

func TestRepeatOffenderRule(t *testing.T) {
	p := budget.OffenderPolicy{Threshold: 3, Window: 10 * time.Minute, Multiplier: 0.5, CoolDown: time.Minute, Decay: time.Hour}
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var o budget.Offences
	flag := func(at time.Duration, cats ...string) bool {
		var strike bool
		o, strike = p.Record(o, t0.Add(at), cats)
		return strike
	}
	// Two flags, then one past the window of the first: still two that count.
	if flag(0, "harassment") || flag(5*time.Minute, "threat") || flag(11*time.Minute, "harassment") {
		t.Fatalf("a strike before three flags within the window: %+v", o)
	}
	if !flag(12*time.Minute, "prompt_injection") || o.Strikes != 1 || len(o.Flags) != 0 {
		t.Fatalf("the third flag within the window is a strike: %+v", o)
	}
	pol := p.Policy(o, t0.Add(12*time.Minute))
	if pol.Multiplier != 0.5 || !pol.CoolDownUntil.Equal(t0.Add(13*time.Minute)) || !pol.DecayUntil.Equal(t0.Add(72*time.Minute)) ||
		!strings.Contains(pol.Reason, "harassment, prompt_injection, threat") {
		t.Fatalf("first strike's policy: %+v", pol)
	}
	// The multiplier decays linearly back to 1, then the policy changes nothing.
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{{12 * time.Minute, 0.5}, {42 * time.Minute, 0.75}, {71 * time.Minute, 0.5 + 0.5*59.0/60}, {72 * time.Minute, 0}, {5 * time.Hour, 0}} {
		if got := pol.MultiplierAt(t0.Add(c.at)); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("multiplier at +%s = %v, want %v", c.at, got, c.want)
		}
	}
	if !pol.Active(t0.Add(20*time.Minute)) || pol.Active(t0.Add(73*time.Minute)) {
		t.Error("the policy is active while it decays, and not after")
	}
	// A second strike before the decay ends squares the multiplier; after it, it starts again.
	flag(20*time.Minute, "hate")
	flag(21*time.Minute, "hate")
	if !flag(22*time.Minute, "hate") || o.Strikes != 2 || p.Policy(o, t0.Add(22*time.Minute)).Multiplier != 0.25 {
		t.Fatalf("second strike: %+v", o)
	}
	for range 5 { // never below the floor
		flag(30*time.Minute, "hate")
		flag(30*time.Minute, "hate")
		flag(30*time.Minute, "hate")
	}
	if m := p.Policy(o, t0.Add(30*time.Minute)).Multiplier; m != 0.1 {
		t.Fatalf("multiplier after %d strikes = %v, want the floor 0.1", o.Strikes, m)
	}
	flag(3*time.Hour, "hate")
	flag(3*time.Hour, "hate")
	if !flag(3*time.Hour, "hate") || o.Strikes != 1 {
		t.Fatalf("a strike after the decay starts again from the first: %+v", o)
	}
}

// Three replicas report flags of one player concurrently: the counter is shared, the third
// flag is the strike, and the ledgers tighten the player's per-actor budget; others keep theirs.
func TestRepeatOffenderTightensAcrossReplicas(t *testing.T) {
	e := provisioned(t)
	cfg := &budget.Config{Budgets: []budget.Budget{{Name: "per-player", Scope: budget.ScopeActor, Window: budget.Hour, Tokens: 100000}}}
	reps := []*replica{newReplica(t, e, cfg, cheapOnly()), newReplica(t, e, cfg, cheapOnly()), newReplica(t, e, cfg, cheapOnly())}
	ctx := context.Background()
	prom := prometheus.NewRegistry()
	var offs []*budget.Offenders
	for i, r := range reps {
		var reg prometheus.Registerer
		if i == 2 { // the replica that sees the third flag
			reg = prom
		}
		o, err := budget.NewOffenders(r.b.Control, budget.OffenderPolicy{CoolDown: time.Hour}, reg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, o)
	}
	if _, err := offs[0].Flag(ctx, "", []string{"hate"}); err == nil {
		t.Fatal("a flag without a player must be refused")
	}
	// Two flags on two replicas at once: no strike yet.
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if p, err := offs[i].Flag(ctx, "player:mo", []string{"harassment"}); err != nil || p != nil {
				t.Errorf("flag %d: %v %+v", i+1, err, p)
			}
		})
	}
	wg.Wait()
	if p, _ := actorpolicy.Get(ctx, reps[0].b.Control, "player:mo"); p != nil {
		t.Fatalf("two flags set a policy: %+v", p)
	}
	p, err := offs[2].Flag(ctx, "player:mo", []string{"prompt_injection"})
	if err != nil || p == nil || p.Multiplier != 0.5 || p.Strikes != 1 {
		t.Fatalf("third flag: %v %+v", err, p)
	}
	mo := budget.WithSubject(ctx, budget.Subject{Actor: "player:mo"})
	kit := budget.WithSubject(ctx, budget.Subject{Actor: "player:kit"})
	for i, r := range reps {
		natstest.WaitFor(t, time.Second, "the strike to reach the replica", func() bool {
			_, err := r.reg.Complete(mo, ask(llm.Purpose("npc_dialogue"), 10))
			return llm.KindOf(err) == llm.KindBudget
		})
		if _, err := r.reg.Complete(kit, ask(llm.Purpose("npc_dialogue"), 10)); err != nil {
			t.Fatalf("replica %d refuses another player: %v", i, err)
		}
	}
	rs, err := budget.Reports(ctx, reps[0].b, time.Now(), "player:mo")
	if err != nil || rs[0].Limit.Tokens != 50000 {
		t.Fatalf("player:mo's per-player limit after a strike: %v %+v", err, rs)
	}
	if got := metricstest.Sum(t, prom, "worldgate_budget_offender_strikes_total", nil); got != 1 {
		t.Fatalf("strikes counted on the replica that struck: %v", got)
	}
}
