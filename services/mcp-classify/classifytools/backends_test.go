package classifytools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
)

// openAIModerationServer speaks POST /v1/moderations as OpenAI documents it: it flags
// hate for texts containing "lesser folk" (a line the rules do not know) and nothing else.
func openAIModerationServer(t *testing.T, calls *atomic.Int32, fail *atomic.Bool) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/moderations" || r.Header.Get("Authorization") != "Bearer sk-test" {
			t.Errorf("request %s %s auth %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
		}
		var body struct {
			Input string `json:"input"`
			Model string `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Input == "" || body.Model != "omni-moderation-latest" {
			t.Errorf("body %+v: %v", body, err)
		}
		if fail.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`))
			return
		}
		hate := strings.Contains(strings.ToLower(body.Input), "lesser folk")
		score := 0.0012
		if hate {
			score = 0.91
		}
		cats := map[string]bool{}
		scores := map[string]float64{}
		types := map[string][]string{}
		for _, c := range []string{"harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent", "self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence", "violence/graphic"} {
			cats[c], scores[c], types[c] = false, 0.0001, []string{"text"}
		}
		cats["hate"], scores["hate"] = hate, score
		cats["violence"], scores["violence"] = strings.Contains(body.Input, "dragon"), 0.7 // fantasy combat: not mapped
		w.Header().Set("Content-Type", "application/json")
		// Encoding a map cannot fail; a write fails only when the client has gone.
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "modr-1", "model": "omni-moderation-latest", "results": []any{map[string]any{
			"flagged": hate || cats["violence"], "categories": cats, "category_scores": scores, "category_applied_input_types": types}}})
	}))
	t.Cleanup(ts.Close)
	return ts
}

// guardServer speaks POST /v1/chat/completions as an OpenAI-compatible server running Llama
// Guard 3 would: "unsafe\nS11" for texts about "the long sleep", "safe" otherwise.
func guardServer(t *testing.T, calls *atomic.Int32) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			t.Errorf("request %s %s", r.Method, r.URL.Path)
		}
		var body struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Model != "llama-guard3:1b" || len(body.Messages) != 1 || body.Messages[0].Role != "user" {
			t.Errorf("body %+v: %v", body, err)
		}
		answer := "safe"
		if len(body.Messages) > 0 && strings.Contains(body.Messages[0].Content, "the long sleep") {
			answer = "unsafe\nS11"
		}
		w.Header().Set("Content-Type", "application/json")
		// Encoding a map cannot fail; a write fails only when the client has gone.
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": body.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": answer}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 200, "completion_tokens": 3, "total_tokens": 203}})
	}))
	t.Cleanup(ts.Close)
	return ts
}

// The tool answers with the rules and both model backends combined, over MCP.
func TestModelBackendsCombinedWithRules(t *testing.T) {
	var oaCalls, guardCalls atomic.Int32
	var fail atomic.Bool
	oa := openAIModerationServer(t, &oaCalls, &fail)
	guard := guardServer(t, &guardCalls)
	rules, err := classifytools.DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	mod := &classifytools.Combined{Rules: rules, Models: []classifytools.Moderator{
		classifytools.NewOpenAIModerator(classifytools.ModelConfig{BaseURL: oa.URL + "/v1", APIKey: "sk-test"}),
		classifytools.NewGuardModerator(classifytools.ModelConfig{BaseURL: guard.URL + "/v1", Model: "llama-guard3:1b"}),
	}}
	srv, err := classifytools.New(classifytools.Options{Moderator: mod, Options: mcpx.Options{Auth: mcpx.AuthConfig{
		StaticTokens: map[string]mcpx.Principal{token: {Subject: "gate", Scopes: []string{mcpx.ScopeClassifyRead}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	cl, err := client.New(context.Background(), client.Config{Servers: []client.ServerConfig{{Name: "classify", URL: ts.URL, Token: token}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	call := func(text string) classifytools.Verdict {
		t.Helper()
		res, err := cl.Call(context.Background(), "moderate-content", map[string]any{"text": text})
		if err != nil {
			t.Fatal(err)
		}
		var v classifytools.Verdict
		if err := res.Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	all := "worldgate-moderation-3.0.0+openai/omni-moderation-latest+guard/llama-guard3:1b"
	for _, c := range []struct {
		text, cats string
	}{
		{"The lesser folk of the eastern towns should be kept out.", "hate"},           // the model catches what the rules miss
		{"I think I will take the long sleep tonight and not come back.", "self_harm"}, // the guard catches it
		{"Kill the dragon before it wakes.", ""},                                       // plain violence is not mapped
		{"Welcome <script>alert(1)</script>", "markup_injection"},                      // the rules catch it
	} {
		v := call(c.text)
		if strings.Join(v.Categories, ",") != c.cats || v.Flagged != (c.cats != "") || v.PolicyVersion != all ||
			strings.Join(v.Backends, ",") != "rules,openai/omni-moderation-latest,guard/llama-guard3:1b" {
			t.Errorf("%q: %+v, want categories %q", c.text, v, c.cats)
		}
	}
	if oaCalls.Load() != 4 || guardCalls.Load() != 4 {
		t.Errorf("calls: openai %d guard %d, want 4 each", oaCalls.Load(), guardCalls.Load())
	}
	// A failing backend is left out and the verdict says which checks ran.
	fail.Store(true)
	v := call("The lesser folk of the eastern towns should be kept out.")
	if v.Flagged || v.PolicyVersion != "worldgate-moderation-3.0.0+guard/llama-guard3:1b" || strings.Join(v.Backends, ",") != "rules,guard/llama-guard3:1b" {
		t.Errorf("with openai failing: %+v", v)
	}
}

func TestGuardAnswerParsing(t *testing.T) {
	for _, c := range []struct {
		answer, cats string
		bad          bool
	}{
		{"safe", "", false},
		{" unsafe\nS1,S10 ", "hate,violence_extreme", false},
		{"unsafe\nS2", "", false},
		{"unsafe\nS14", "", false}, // code-interpreter abuse in Llama Guard 3, not prompt injection
		{"unsafe\nS11,S14", "self_harm", false},
		{"I cannot help with that", "", true},
		{"", "", true},
	} {
		v, err := classifytools.ParseGuardAnswer(c.answer)
		if (err != nil) != c.bad || strings.Join(v.Categories, ",") != c.cats {
			t.Errorf("%q: %+v %v", c.answer, v, err)
		}
	}
}
