package budget_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/llm/openai"
)

// paidUpstream is an OpenAI-compatible server whose first answer does not match the output
// schema and whose later answers do; every answer uses the whole completion cap (100 tokens).
// It counts the calls it was paid for.
func paidUpstream(t *testing.T) (*openai.Provider, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		text := `{"line":"The lamps gutter."}`
		if calls.Add(1) == 1 {
			text = "The lamps gutter, says Mira."
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1735689600,"model":%q,
"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],
"usage":{"prompt_tokens":40,"completion_tokens":100,"total_tokens":140}}`, req.Model, text)
	}))
	t.Cleanup(srv.Close)
	p, err := openai.New(openai.Config{Name: "paid", BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	return p, &calls
}

// Priced on completion tokens only, so that a call that uses its whole cap costs exactly its
// estimate: $0.01 a call.
var paidPrices = llm.DefaultPrices().Set("paid:line-model", llm.Price{Output: 100})

func lineRequest() *llm.Request {
	return &llm.Request{Purpose: "npc_dialogue", MaxTokens: 100, System: "You voice Mira.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "What is that smell?"}},
		Output: &llm.OutputSchema{Name: "line", Schema: json.RawMessage(
			`{"type":"object","properties":{"line":{"type":"string"}},"required":["line"],"additionalProperties":false}`)}}
}

// The schema repair after a malformed answer is a second paid call: it reserves its own
// estimate before it is made. With room for one call only, the repair is refused and the
// budget holds what the one call cost; with room for both, each is settled at its cost.
func TestRepairReservesItsOwnEstimate(t *testing.T) {
	const oneCall = 0.01
	for _, tc := range []struct {
		name       string
		limit      float64
		wantCalls  int64
		wantRefuse bool
	}{
		{"room for one call", 1.5 * oneCall, 1, true},
		{"room for both", 2.5 * oneCall, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := provisioned(t)
			paid, calls := paidUpstream(t)
			cfg := &budget.Config{Budgets: []budget.Budget{{Name: "global-day", Scope: budget.ScopeGlobal, Window: budget.Day, USD: tc.limit}}}
			r := newReplica(t, e, cfg, llm.Config{Tiers: map[string][]string{"cheap": {"paid:line-model"}}},
				llm.WithProviders(paid), llm.WithPrices(paidPrices))
			resp, err := r.reg.Complete(context.Background(), lineRequest())
			switch {
			case tc.wantRefuse && llm.KindOf(err) != llm.KindBudget:
				t.Fatalf("the repair should be refused by the budget; got %v", err)
			case !tc.wantRefuse && err != nil:
				t.Fatal(err)
			case !tc.wantRefuse && (!resp.Repaired || resp.CostUSD < 2*oneCall-1e-9):
				t.Fatalf("want a repaired answer costing two calls: repaired %v, $%.6f", resp.Repaired, resp.CostUSD)
			}
			if got := calls.Load(); got != tc.wantCalls {
				t.Fatalf("the upstream was paid for %d calls, want %d", got, tc.wantCalls)
			}
			reports, err := budget.Reports(context.Background(), r.b, time.Now(), "")
			if err != nil || len(reports) != 1 {
				t.Fatal(err, reports)
			}
			used := budget.USD(reports[0].Used.Micros)
			if used > tc.limit {
				t.Fatalf("the budget ended at $%.6f of $%.6f: a call ran without its own reservation", used, tc.limit)
			}
			if want := float64(tc.wantCalls) * oneCall; used < want-1e-6 || used > want+1e-6 {
				t.Fatalf("the ledger holds $%.6f; the %d calls made cost $%.6f", used, tc.wantCalls, want)
			}
		})
	}
}
