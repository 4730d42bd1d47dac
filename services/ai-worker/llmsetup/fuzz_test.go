package llmsetup_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/scripted"
	"github.com/worldgate/worldgate/shared/llm"
)

// FuzzExtractJSON: model output is outside input; extraction never panics
// and, when it returns valid JSON, validation does not either.
func FuzzExtractJSON(f *testing.F) {
	for _, s := range []string{"```json\n{\"a\":1}\n```", "text {\"a\": [1,2]} text", "[", "}{", "```", ""} {
		f.Add(s)
	}
	schema := []byte(`{"type":"object","properties":{"a":{"type":"integer"}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		out := llm.ExtractJSON(s)
		_ = llm.ValidateJSON(schema, []byte(out))
	})
}

// FuzzRetryAfter: header values come from providers.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "0.5", "-3", "1e308", "NaN", "Wed, 21 Oct 2015 07:28:00 GMT", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{}
		h.Set("Retry-After", v)
		h.Set("Retry-After-Ms", v)
		if d := llm.ParseRetryAfter(h, time.Now()); d < 0 || d > time.Hour {
			t.Fatalf("ParseRetryAfter(%q) = %v", v, d)
		}
	})
}

// FuzzScripted: the scripted provider reads tool schemas, tool results and
// output schemas written by others; whatever they hold, it must answer or
// return an error, never panic.
func FuzzScripted(f *testing.F) {
	f.Add(`{"type":"object","properties":{"locationId":{"type":"string"}},"required":["locationId"]}`, `{"name":"Mill","npcs":[{"name":"Ada"}]}`, `{"type":"object","properties":{"text":{"type":"string"}}}`)
	f.Add(`{"$ref":"#/$defs/x","$defs":{"x":{"$ref":"#/$defs/x"}}}`, `not json`, `{"type":"array","items":{"type":"array"},"minItems":3}`)
	f.Add(`[]`, `[[[[]]]]`, `{"anyOf":[{"type":"null"}]}`)
	p := scripted.New(scripted.Options{})
	f.Fuzz(func(t *testing.T, toolSchema, toolResult, outSchema string) {
		req := &llm.Request{
			Purpose:  roles.PurposeQuestSeed,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: `locationId: "loc-1"`}},
			Tools:    []llm.Tool{{Name: "get-location", InputSchema: json.RawMessage(toolSchema)}},
			Output:   &llm.OutputSchema{Name: "out", Schema: json.RawMessage(outSchema)},
		}
		resp, err := p.Complete(context.Background(), req)
		if err != nil {
			return
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: resp.ToolCalls})
		for _, c := range resp.ToolCalls {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: toolResult})
		}
		_, _ = p.Complete(context.Background(), req)
	})
}
