package scripted_test

import (
	"context"
	"testing"

	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/services/ai-worker/scripted"
	"github.com/worldgate/worldgate/shared/llm"
)

func benchCalls(b *testing.B, req *llm.Request) {
	p := scripted.New(scripted.Options{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkToolTurn: the first turn, choosing 4 tool calls with valid args.
func BenchmarkToolTurn(b *testing.B) { benchCalls(b, ambienceRequest("loc-tavern")) }

// BenchmarkContentTurn: the final turn, writing schema-valid ambience from
// four tool results.
func BenchmarkContentTurn(b *testing.B) {
	req := ambienceRequest("loc-tavern")
	p := scripted.New(scripted.Options{})
	first, err := p.Complete(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: first.ToolCalls})
	for _, c := range first.ToolCalls {
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: tavernResults[c.Name]})
	}
	benchCalls(b, req)
}

// BenchmarkRegistryScripted: a content turn through the default registry
// (routing, pricing, schema validation).
func BenchmarkRegistryScripted(b *testing.B) {
	r, err := llm.NewRegistry(llmsetup.DefaultConfig(), llm.WithProviders(scripted.New(scripted.Options{MaxToolRounds: -1})))
	if err != nil {
		b.Fatal(err)
	}
	req := ambienceRequest("loc-tavern")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
