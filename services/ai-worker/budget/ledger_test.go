package budget_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/services/ai-worker/scripted"
	"github.com/worldgate/worldgate/shared/actorpolicy"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// replica is one ai-worker's provider layer: its own NATS connection, ledger and registry
// (the scripted provider, priced at the embedded table's scripted-small/-large rates).
type replica struct {
	ledger *budget.Ledger
	reg    *llm.Registry
	b      budget.Buckets
	prom   *prometheus.Registry
}

func provisioned(t testing.TB) *natstest.Env {
	t.Helper()
	e := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := natsx.Provision(ctx, e.JS, natsx.DefaultTopology(natsx.TopologyOptions{}), logx.Discard()); err != nil {
		t.Fatal(err)
	}
	return e
}

func newReplica(t testing.TB, e *natstest.Env, cfg *budget.Config, tiers llm.Config, opts ...llm.Option) *replica {
	t.Helper()
	nc, err := nats.Connect(e.Server.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := budget.OpenBuckets(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	prom := prometheus.NewRegistry()
	m, err := budget.NewMetrics(prom)
	if err != nil {
		t.Fatal(err)
	}
	l, err := budget.NewLedger(ctx, b, cfg, budget.Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	reg, err := llm.NewRegistry(tiers, append([]llm.Option{llm.WithProviders(scripted.New(scripted.Options{})), llm.WithAdmitter(l),
		llm.WithMetrics(prom), llm.WithLogger(logx.Discard())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &replica{ledger: l, reg: reg, b: b, prom: prom}
}

func ask(purpose llm.Purpose, maxTokens int) *llm.Request {
	return &llm.Request{Purpose: purpose, MaxTokens: maxTokens, System: "You describe a tavern.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Describe the tavern at dusk in one sentence."}}}
}

func cheapOnly() llm.Config {
	return llm.Config{Tiers: map[string][]string{"cheap": {"scripted:scripted-small"}}}
}

func TestThreeReplicasSharingABudgetNeverExceedIt(t *testing.T) {
	e := provisioned(t)
	const limitUSD = 0.0015
	cfg := &budget.Config{Budgets: []budget.Budget{{Name: "global-day", Scope: budget.ScopeGlobal, Window: budget.Day, USD: limitUSD}}}
	reps := []*replica{newReplica(t, e, cfg, cheapOnly()), newReplica(t, e, cfg, cheapOnly()), newReplica(t, e, cfg, cheapOnly())}
	// One call's estimate, as the registry computes it for these requests.
	p, _ := llm.DefaultPrices().Lookup("scripted", "scripted-small")
	req := ask(llm.Purpose("ambience"), 200)
	oneEstimate := p.Cost(llm.Usage{PromptTokens: llm.EstimatePromptTokens(req), CompletionTokens: 200})

	var (
		mu       sync.Mutex
		spent    float64
		served   int
		refused  atomic.Int64
		wg       sync.WaitGroup
		otherErr error
	)
	for _, r := range reps {
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					resp, err := r.reg.Complete(context.Background(), ask(llm.Purpose("ambience"), 200))
					switch {
					case err == nil:
						mu.Lock()
						spent += resp.CostUSD
						served++
						mu.Unlock()
					case llm.KindOf(err) == llm.KindBudget:
						refused.Add(1)
					default:
						mu.Lock()
						otherErr = err
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	if otherErr != nil {
		t.Fatal(otherErr)
	}
	if served == 0 || refused.Load() == 0 {
		t.Fatalf("the budget should bind: %d served, %d refused", served, refused.Load())
	}
	if spent > limitUSD+oneEstimate {
		t.Fatalf("three replicas spent $%.6f on %d calls; the budget is $%.6f, one call's estimate $%.6f", spent, served, limitUSD, oneEstimate)
	}
	reports, err := budget.Reports(context.Background(), reps[0].b, time.Now(), "")
	if err != nil || len(reports) != 1 {
		t.Fatal(err, reports)
	}
	// Every reservation was settled: the ledger holds exactly what the calls cost.
	if got := budget.USD(reports[0].Used.Micros); got > limitUSD+oneEstimate || got < spent-1e-6*float64(served) || got > spent+1e-6*float64(served) {
		t.Fatalf("ledger holds $%.6f; the calls cost $%.6f", got, spent)
	}
	t.Logf("%d calls served for $%.6f of $%.6f (one estimate $%.6f), %d refused", served, spent, limitUSD, oneEstimate, refused.Load())
}

func TestDegradeOrderRichThenCheapThenRefused(t *testing.T) {
	e := provisioned(t)
	// scripted-large costs ten times scripted-small. Over 60 % the rich tier gives way to
	// the cheap one, which may use the budget up to its limit; then every call is refused
	// (the agent proposes static fallback content).
	cfg := &budget.Config{Budgets: []budget.Budget{{Name: "quests", Scope: budget.ScopePurpose, Match: string(llm.Purpose("quest_seed")),
		Window: budget.Hour, USD: 0.002, DegradeAt: 0.6}}}
	r := newReplica(t, e, cfg, llmsetup.DefaultConfig())
	var order []string
	for range 200 {
		resp, err := r.reg.Complete(context.Background(), ask(llm.Purpose("quest_seed"), 300))
		step := ""
		switch {
		case err == nil:
			step = resp.Tier
			if resp.Tier == llmsetup.TierCheap && (len(resp.Downgrades) != 1 || resp.Downgrades[0].From != llmsetup.TierRich) {
				t.Fatalf("a cheap answer for a rich purpose records its downgrade: %+v", resp.Downgrades)
			}
		case llm.KindOf(err) == llm.KindBudget:
			step = "refused"
		default:
			t.Fatal(err)
		}
		if len(order) == 0 || order[len(order)-1] != step {
			order = append(order, step)
		}
		if step == "refused" {
			break
		}
	}
	if len(order) != 3 || order[0] != llmsetup.TierRich || order[1] != llmsetup.TierCheap || order[2] != "refused" {
		t.Fatalf("degrade order %v, want [rich cheap refused]", order)
	}
	if v := metricstest.Sum(t, r.prom, "worldgate_ai_downgrades_total", nil); v == 0 {
		t.Error("downgrades are counted")
	}
}

func TestKillSwitchStopsCallsAcrossReplicas(t *testing.T) {
	e := provisioned(t)
	cfg := &budget.Config{Budgets: []budget.Budget{{Name: "global-month", Scope: budget.ScopeGlobal, Window: budget.Month, USD: 100}}}
	reps := []*replica{newReplica(t, e, cfg, cheapOnly()), newReplica(t, e, cfg, cheapOnly()), newReplica(t, e, cfg, cheapOnly())}
	ctx := context.Background()
	for i, r := range reps {
		if _, err := r.reg.Complete(ctx, ask(llm.Purpose("ambience"), 50)); err != nil {
			t.Fatalf("replica %d before the pause: %v", i, err)
		}
	}
	paused := time.Now()
	if _, err := budget.Apply(ctx, reps[0].b.Control, "global-month", budget.Change{Pause: true, By: "test"}); err != nil {
		t.Fatal(err)
	}
	stopped := func(r *replica) bool {
		_, err := r.reg.Complete(ctx, ask(llm.Purpose("ambience"), 50))
		return llm.KindOf(err) == llm.KindBudget
	}
	for i, r := range reps {
		natstest.WaitFor(t, time.Second, "replica to obey the pause", func() bool { return stopped(r) })
		t.Logf("replica %d stopped %s after the pause", i, time.Since(paused).Round(time.Millisecond))
	}
	// Paused means no call at all: not one more reaches the provider on any replica.
	for i, r := range reps {
		if !stopped(r) {
			t.Fatalf("replica %d made a call while paused", i)
		}
	}
	if _, err := budget.Apply(ctx, reps[1].b.Control, "global-month", budget.Change{Resume: true, By: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		natstest.WaitFor(t, time.Second, "replica to resume", func() bool { return !stopped(r) })
	}
	// Raising and setting limits act the same way.
	zero := 0.000001
	if _, err := budget.Apply(ctx, reps[2].b.Control, "global-month", budget.Change{SetUSD: &zero}); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, time.Second, "the lowered limit to bind", func() bool { return stopped(reps[0]) })
	if _, err := budget.Apply(ctx, reps[2].b.Control, "no-such-budget", budget.Change{Pause: true}); err == nil {
		t.Fatal("pausing an unknown budget must fail")
	}
}

func TestActorPolicyTightensOneActorsBudget(t *testing.T) {
	e := provisioned(t)
	cfg := &budget.Config{Budgets: []budget.Budget{{Name: "per-player", Scope: budget.ScopeActor, Window: budget.Hour, Tokens: 2000}}}
	r := newReplica(t, e, cfg, cheapOnly())
	ada := budget.WithSubject(context.Background(), budget.Subject{Actor: "player:ada"})
	bram := budget.WithSubject(context.Background(), budget.Subject{Actor: "player:bram"})
	count := func(ctx context.Context) int {
		n := 0
		for range 50 {
			if _, err := r.reg.Complete(ctx, ask(llm.Purpose("npc_dialogue"), 100)); err != nil {
				if llm.KindOf(err) != llm.KindBudget {
					t.Fatal(err)
				}
				return n
			}
			n++
		}
		return n
	}
	full := count(bram)
	if err := actorpolicy.Set(context.Background(), r.b.Control, actorpolicy.Policy{Actor: "player:ada", Multiplier: 0.5, Reason: "repeat offender"}); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, time.Second, "the policy to reach the ledger", func() bool {
		rs, _ := budget.Reports(context.Background(), r.b, time.Now(), "player:ada")
		return len(rs) == 1 && rs[0].Limit.Tokens == 1000
	})
	half := count(ada)
	if full == 0 || half == 0 || half > full/2+1 || half < full/2-1 {
		t.Fatalf("bram got %d calls, ada with multiplier 0.5 got %d", full, half)
	}
	// A cool-down pays for nothing.
	if err := actorpolicy.Set(context.Background(), r.b.Control, actorpolicy.Policy{Actor: "player:bram", CoolDownUntil: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, time.Second, "the cool-down", func() bool {
		_, err := r.reg.Complete(bram, ask(llm.Purpose("npc_dialogue"), 1))
		return llm.KindOf(err) == llm.KindBudget
	})
	// Aggregate report: both actors have a window; nobody's id is a metric label.
	rs, err := budget.Reports(context.Background(), r.b, time.Now(), "")
	if err != nil || rs[0].Subjects != 2 || rs[0].Above80 != 2 {
		t.Fatalf("%v %+v", err, rs)
	}
}

// BenchmarkReserveSettle is the ledger's overhead per LLM call on the embedded server: one
// reservation and one settlement in a global, a purpose and an actor budget.
func BenchmarkReserveSettle(b *testing.B) {
	e := provisioned(b)
	cfg := &budget.Config{Budgets: []budget.Budget{
		{Name: "global", Scope: budget.ScopeGlobal, Window: budget.Day, USD: 1e9},
		{Name: "npc", Scope: budget.ScopePurpose, Match: string(llm.Purpose("npc_dialogue")), Window: budget.Hour, USD: 1e9},
		{Name: "player", Scope: budget.ScopeActor, Window: budget.Hour, Tokens: 1e15},
	}}
	ctx := context.Background()
	bk, err := budget.OpenBuckets(ctx, e.JS)
	if err != nil {
		b.Fatal(err)
	}
	l, err := budget.NewLedger(ctx, bk, cfg, budget.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	sctx := budget.WithSubject(ctx, budget.Subject{Actor: "player:ada"})
	a := llm.Admission{Purpose: llm.Purpose("npc_dialogue"), Target: llm.Target{Provider: "scripted", Model: "scripted-small"},
		PromptTokens: 400, CompletionTokens: 300, EstimateUSD: 0.0001}
	b.ResetTimer()
	for b.Loop() {
		tk, err := l.Admit(sctx, a)
		if err != nil {
			b.Fatal(err)
		}
		if err := tk.Settle(ctx, llm.Usage{PromptTokens: 350, CompletionTokens: 120}, 0.00005); err != nil {
			b.Fatal(err)
		}
	}
}
