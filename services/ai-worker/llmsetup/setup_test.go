package llmsetup_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/shared/llm"
)

func TestDefaultIsScripted(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := llmsetup.Default(llmsetup.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Purpose: roles.PurposeQuestSeed, Messages: []llm.Message{{Role: llm.RoleUser, Content: `Seed a quest at locationId: "loc-mill"`}}}
	resp, err := r.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Provider != "scripted" || resp.Model != "scripted-large" || resp.CostUSD <= 0 || resp.PriceMissing {
		t.Fatalf("resp = %+v", resp)
	}
	mfs, _ := reg.Gather()
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"worldgate_ai_requests_total", "worldgate_ai_tokens_total", "worldgate_ai_cost_usd_total", "worldgate_ai_latency_seconds"} {
		if !names[n] {
			t.Errorf("metric %s not recorded", n)
		}
	}
	// A second registry on the same Registerer reuses the collectors.
	if _, err := llmsetup.Default(llmsetup.Options{Registerer: reg}); err != nil {
		t.Fatalf("second registry on one Registerer: %v", err)
	}
}

func TestYAMLOllamaWithScriptedFallback(t *testing.T) {
	var calls atomic.Int32
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		if r.URL.Path != "/v1/chat/completions" || m["model"] != "llama3.2" || r.Header.Get("Authorization") != "" {
			t.Errorf("unexpected request %s %v auth=%q", r.URL.Path, m["model"], r.Header.Get("Authorization"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		_, _ = io.WriteString(w, `{"error":{"message":"model is loading","type":"server_error"}}`)
	}))
	defer ollama.Close()
	yml := `
providers:
  - name: ollama
    type: openai
    base_url: ` + ollama.URL + `/v1
    capabilities: {tools: true, json_schema: true, streaming: true, max_context: 8192}
  - name: scripted
    type: scripted
tiers:
  cheap: [ollama:llama3.2, scripted:scripted-small]
  rich: [scripted:scripted-large]
purposes: {ambience: cheap, quest_seed: rich}
retry: {max_attempts: 2, base_delay: 1ms, max_delay: 2ms}
timeout: 5s
`
	f, err := llmsetup.Parse([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	r, err := llmsetup.Build(f, llmsetup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.Complete(context.Background(), &llm.Request{Purpose: roles.PurposeAmbience,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "locationId: loc-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Provider != "scripted" || calls.Load() != 2 || resp.Attempts != 3 {
		t.Fatalf("want 2 ollama attempts then scripted; got provider %s, %d calls, %d attempts", resp.Provider, calls.Load(), resp.Attempts)
	}
}

func TestConfigErrorsAreSentences(t *testing.T) {
	for _, yml := range []string{
		"tiers: {cheap: [nobody:model]}\n",
		"providers: [{name: x, type: gemini}]\n",
		"providers: [{name: x, type: openai, api_key_env: WG_TEST_UNSET_KEY}]\n",
		"unknown_field: 1\n",
	} {
		f, err := llmsetup.Parse([]byte(yml))
		if err == nil {
			_, err = llmsetup.Build(f, llmsetup.Options{Getenv: func(string) string { return "" }})
		}
		if err == nil || !strings.Contains(err.Error(), " ") {
			t.Errorf("%q: want an explanatory error, got %v", yml, err)
		}
	}
}
