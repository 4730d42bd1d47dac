package aiworker_test

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
)

// BenchmarkAgentTask measures whole agent tasks (trigger → MCP tools over HTTP against graphd
// → cache → scripted model → validated proposal with provenance), without publishing: tasks/s
// and tasks/s per core (GOMAXPROCS). "miss" gives every task new player words, so the model
// runs; "hit" repeats the same content, so the answer comes from the context-hash cache.
//
//	go test ./services/ai-worker/aiworker -run '^$' -bench AgentTask -benchtime 200x
func BenchmarkAgentTask(b *testing.B) {
	s := startStack(b, stackOpts{noApp: true})
	role := roles.MustLookup(roles.NPCDialogue)
	var n atomic.Int64 // shared by every run, so "miss" never repeats a basket
	for _, mode := range []string{"miss", "hit"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					utter := "How much for the apples?"
					if mode == "miss" {
						utter = fmt.Sprintf("How much for the apples, basket %d?", n.Add(1))
					}
					env, err := events.NewEnvelope(events.PlayerSpokeToNPC, "bench", events.Actor{Kind: "player", ID: "player:ada"},
						events.PlayerSpokeToNPCPayload{PlayerID: "player:ada", NPCID: "npc:mira", LocationID: "loc:square", Utterance: utter})
					if err != nil {
						b.Fatal(err)
					}
					raw, _ := json.Marshal(env)
					res, err := s.worker.Trigger(ctx, role, raw)
					if err != nil || res.Proposal == nil || res.Proposal.Provenance.Fallback != "" {
						b.Fatalf("task failed: %v %+v", err, res)
					}
				}
			})
			el := time.Since(start).Seconds()
			tps := float64(b.N) / el
			b.ReportMetric(tps, "tasks/s")
			b.ReportMetric(tps/float64(goruntime.GOMAXPROCS(0)), "tasks/s/core")
		})
	}
}
