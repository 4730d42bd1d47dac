package anthropic_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/llm/anthropic"
)

// Anthropic's answers for an account without credit, a model it does not serve, and output
// its content filter blocked: status codes and bodies as the Messages API sends them.
var (
	creditBody  = errBody("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")
	billingBody = errBody("billing_error", "There is an issue with your billing or payment information.")
	modelBody   = errBody("not_found_error", "model: claude-9-haiku")
	policyBody  = errBody("invalid_request_error", "Output blocked by content filtering policy")
)

func healthRegistry(t *testing.T, tier []string, ps ...llm.Provider) *llm.Registry {
	t.Helper()
	r, err := llm.NewRegistry(llm.Config{
		Tiers:   map[string][]string{"cheap": tier},
		Retry:   llm.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxRetryAfter: 5 * time.Second},
		Timeout: 10 * time.Second,
		Breaker: llm.BreakerPolicy{OpenFor: time.Hour},
	}, llm.WithProviders(ps...))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func health(r *llm.Registry, target string) llm.TargetHealth {
	for _, h := range r.Health() {
		if h.Target == target {
			return h
		}
	}
	return llm.TargetHealth{}
}

func TestQuotaAndUnknownModelFailOverWithoutRetryAndOpenTheCircuit(t *testing.T) {
	for name, c := range map[string]struct {
		rep  reply
		kind llm.ErrorKind
	}{
		"credit balance": {reply{status: 400, body: creditBody}, llm.KindQuota},
		"billing_error":  {reply{status: 402, body: billingBody}, llm.KindQuota},
		"unknown model":  {reply{status: 404, body: modelBody}, llm.KindModelNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			a := newUpstream(t, c.rep)
			b := newUpstream(t, reply{body: message(`[{"type":"text","text":"from b"}]`, "end_turn", 5, 1, 0)})
			r := healthRegistry(t, []string{"a:claude-haiku-4-5", "b:claude-haiku-4-5"}, a.provider(t, "a"), b.provider(t, "b"))
			for i := range 2 {
				resp, err := r.Complete(context.Background(), userReq("hi"))
				if err != nil || resp.Provider != "b" {
					t.Fatalf("call %d: %v %+v", i, err, resp)
				}
			}
			if n := len(a.requests()); n != 1 {
				t.Fatalf("a called %d times; want once: no retry, then its open circuit is skipped", n)
			}
			if h := health(r, "a:claude-haiku-4-5"); h.State != llm.CircuitOpen || h.LastErrorKind != c.kind {
				t.Fatalf("%+v, want open with %s", h, c.kind)
			}
			solo := healthRegistry(t, []string{"a:claude-haiku-4-5"}, newUpstream(t, c.rep).provider(t, "a"))
			if _, err := solo.Complete(context.Background(), userReq("hi")); llm.KindOf(err) != c.kind {
				t.Fatalf("err = %v, want kind %s", err, c.kind)
			}
		})
	}
}

func TestContentFilterIsPolicyViolationNotFailedOver(t *testing.T) {
	a := newUpstream(t, reply{status: 400, body: policyBody})
	b := newUpstream(t, reply{body: message(`[{"type":"text","text":"never"}]`, "end_turn", 5, 1, 0)})
	r := healthRegistry(t, []string{"a:claude-haiku-4-5", "b:claude-haiku-4-5"}, a.provider(t, "a"), b.provider(t, "b"))
	_, err := r.Complete(context.Background(), userReq("hi"))
	if llm.KindOf(err) != llm.KindContentPolicy || len(a.requests()) != 1 || len(b.requests()) != 0 {
		t.Fatalf("err = %v (%s); a=%d b=%d", err, llm.KindOf(err), len(a.requests()), len(b.requests()))
	}
	if h := health(r, "a:claude-haiku-4-5"); h.State != llm.CircuitClosed {
		t.Fatalf("%+v", h)
	}
}

func TestCacheWriteTokensPricedAtTheirOwnRate(t *testing.T) {
	body := `{"id":"msg_01","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001",
"content":[{"type":"text","text":"The tavern hums."}],"stop_reason":"end_turn","stop_sequence":null,
"usage":{"input_tokens":100,"cache_creation_input_tokens":1000,"cache_read_input_tokens":2000,"output_tokens":50,"service_tier":"standard"}}`
	u := newUpstream(t, reply{body: body})
	p, err := anthropic.New(anthropic.Config{Name: "anthropic", BaseURL: u.srv.URL + "/", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	r := healthRegistry(t, []string{"anthropic:claude-haiku-4-5"}, p)
	resp, err := r.Complete(context.Background(), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != (llm.Usage{PromptTokens: 3100, CompletionTokens: 50, CachedPromptTokens: 2000, CacheWriteTokens: 1000}) {
		t.Fatalf("usage %+v", resp.Usage)
	}
	// claude-haiku-4-5: input $1, cache read $0.10, cache write $1.25, output $5 per million.
	want := (100*1.00 + 2000*0.10 + 1000*1.25 + 50*5.00) / 1e6
	if math.Abs(resp.CostUSD-want) > 1e-12 {
		t.Fatalf("cost %.10f, want %.10f (cache writes at input price would be %.10f)", resp.CostUSD, want, want-1000*0.25/1e6)
	}
}
