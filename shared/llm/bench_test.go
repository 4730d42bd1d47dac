package llm_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/llm"
)

// canned answers instantly, to isolate the Registry's own cost.
type canned struct{}

func (canned) Name() string { return "canned" }
func (canned) Capabilities() llm.Capabilities {
	return llm.Capabilities{Tools: true, JSONSchema: true, Streaming: true}
}
func (canned) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: `{"text":"Quiet.","mood":"calm"}`, FinishReason: llm.FinishStop,
		Usage: llm.Usage{PromptTokens: 300, CompletionTokens: 20, CachedPromptTokens: 100}}, nil
}
func (c canned) Stream(ctx context.Context, r *llm.Request, f func(llm.Delta) error) (*llm.Response, error) {
	return c.Complete(ctx, r)
}

// BenchmarkRegistryOverhead: routing, per-attempt timeout, pricing,
// metrics and JSON-schema validation around a provider that costs nothing.
func BenchmarkRegistryOverhead(b *testing.B) {
	r, err := llm.NewRegistry(llm.Config{Tiers: map[string][]string{"cheap": {"canned:gpt-4o-mini"}}, DefaultTier: "cheap"},
		llm.WithProviders(canned{}), llm.WithMetrics(prometheus.NewRegistry()))
	if err != nil {
		b.Fatal(err)
	}
	req := &llm.Request{Purpose: llm.Purpose("ambience"), Messages: []llm.Message{{Role: llm.RoleUser, Content: "Describe loc-1."}},
		Output: &llm.OutputSchema{Name: "ambience", Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"mood":{"type":"string","enum":["calm","tense"]}},"required":["text","mood"],"additionalProperties":false}`)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
