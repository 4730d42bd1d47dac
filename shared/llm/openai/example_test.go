package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/llm/openai"
)

// A provider is plugged into the llm.Registry, which routes each purpose to a tier of
// "provider:model" targets (with retries, failover, a circuit breaker and pricing around
// them). Here the provider is the OpenAI-compatible one (OpenAI, Ollama, vLLM, Groq …), and
// the upstream an httptest server speaking the chat completions API.
func Example() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		last := req.Messages[len(req.Messages)-1].Content
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1735689600,"model":%q,
"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],
"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`, req.Model, "You said: "+last)
	}))
	defer upstream.Close()

	local, err := openai.New(openai.Config{Name: "local", BaseURL: upstream.URL + "/v1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg, err := llm.NewRegistry(llm.Config{
		Tiers:    map[string][]string{"cheap": {"local:tiny-model"}},
		Purposes: map[llm.Purpose]string{"ambience": "cheap"},
	}, llm.WithProviders(local), llm.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := reg.Complete(context.Background(), &llm.Request{Purpose: "ambience",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "the lamps gutter"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text)
	fmt.Println(resp.Provider, resp.Model, resp.Tier, resp.Usage.Total(), "tokens")
	// Output:
	// You said: the lamps gutter
	// local tiny-model cheap 17 tokens
}
