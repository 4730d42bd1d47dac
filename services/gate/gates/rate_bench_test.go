package gates_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/gates"
)

// BenchmarkRateGateMove is the rate gate's check of one move with the default budgets (an
// actor and a global window per kind), a thousand players taking turns, one check at a time:
// what each check waits for, and the NATS messages it sends (requests, KV writes) per move.
func BenchmarkRateGateMove(b *testing.B) {
	s := newStack(b)
	cfg := testConfig()
	cfg.Rate.Budgets = gates.DefaultConfig().Rate.Budgets
	cfg.Rate.Window = time.Hour
	budget := cfg.Rate.Budgets["*"]
	budget.ActorCount, budget.GlobalCount = 1<<20, 1<<30
	cfg.Rate.Budgets["*"] = budget
	d := s.deps(cfg)
	d.Now = time.Now
	spec, _ := gates.Builtin().Lookup(gates.Rate)
	g, err := spec.New(context.Background(), d)
	if err != nil {
		b.Fatal(err)
	}
	moves := make([]*events.Proposal, b.N)
	for i := range moves {
		player := fmt.Sprintf("player:p%d", i%1000)
		p := startAt(proposal(b, events.KindPlayerMoved, map[string]any{"playerId": player, "fromLocationId": "loc:square", "toLocationId": "loc:gate", "direction": "north"}), "rate")
		p.Actor.ID = player
		moves[i] = p
	}
	ctx := context.Background()
	before := s.nats.Conn.Stats()
	b.ResetTimer()
	for _, p := range moves {
		dec, err := g.Check(ctx, p)
		if err != nil || dec.Outcome != gates.Passed {
			b.Fatalf("%s: %v %v", p.ProposalID, dec.Outcome, err)
		}
	}
	b.StopTimer()
	after := s.nats.Conn.Stats()
	b.ReportMetric(float64(after.OutMsgs-before.OutMsgs)/float64(b.N), "nats-msgs-sent/move")
}
