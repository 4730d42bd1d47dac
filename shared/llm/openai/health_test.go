package openai_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
)

// The error bodies below are the ones OpenAI's API answers with, status codes included.
const (
	quotaBody = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	modelBody = "{\"error\":{\"message\":\"The model `gpt-9-mini` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}"
	// Ollama's OpenAI-compatible endpoint, for a model that was never pulled.
	ollamaModelBody = `{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`
	policyBody      = `{"error":{"message":"Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system.","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}`
	serverBody      = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
)

func healthRegistry(t *testing.T, reg prometheus.Registerer, brk llm.BreakerPolicy, tier []string, ps ...llm.Provider) *llm.Registry {
	t.Helper()
	opts := []llm.Option{llm.WithProviders(ps...), llm.WithPrices(testPrices)}
	if reg != nil {
		opts = append(opts, llm.WithMetrics(reg))
	}
	r, err := llm.NewRegistry(llm.Config{
		Tiers:   map[string][]string{"cheap": tier},
		Retry:   llm.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxRetryAfter: 5 * time.Second},
		Timeout: 10 * time.Second,
		Breaker: brk,
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func state(r *llm.Registry, target string) llm.TargetHealth {
	for _, h := range r.Health() {
		if h.Target == target {
			return h
		}
	}
	return llm.TargetHealth{}
}

func TestInsufficientQuotaNotRetriedFailsOverAndOpensCircuit(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := newUpstream(t, reply{status: 429, body: quotaBody})
	b := newUpstream(t, reply{body: completion("gpt-4o-mini", "from b", "", "stop", 5, 1, 0)})
	r := healthRegistry(t, reg, llm.BreakerPolicy{OpenFor: time.Hour}, []string{"a:gpt-4o-mini", "b:gpt-4o-mini"}, a.provider(t, "a"), b.provider(t, "b"))

	resp, err := r.Complete(context.Background(), userReq("hi"))
	if err != nil || resp.Provider != "b" {
		t.Fatalf("quota on a should fail over to b: %v %+v", err, resp)
	}
	if n := len(a.requests()); n != 1 {
		t.Fatalf("insufficient_quota is not a rate limit: a was called %d times, want 1 (no retry)", n)
	}
	h := state(r, "a:gpt-4o-mini")
	if h.State != llm.CircuitOpen || h.LastErrorKind != llm.KindQuota {
		t.Fatalf("an exhausted quota opens a's circuit at once: %+v", h)
	}
	// The next call skips a altogether.
	if resp, err := r.Complete(context.Background(), userReq("again")); err != nil || resp.Provider != "b" {
		t.Fatalf("%v %+v", err, resp)
	}
	if n := len(a.requests()); n != 1 {
		t.Fatalf("an open circuit must be skipped: a was called %d times", n)
	}
	if v := metricstest.Sum(t, reg, "worldgate_ai_targets_skipped_total", map[string]string{"provider": "a", "reason": "circuit_open"}); v != 1 {
		t.Errorf("skipped(a, circuit_open) = %v, want 1", v)
	}
	if v := metricstest.Sum(t, reg, "worldgate_ai_circuit_state", map[string]string{"provider": "a"}); v != 2 {
		t.Errorf("circuit state gauge of a = %v, want 2 (open)", v)
	}

	// Alone, a quota error is returned as such, at once.
	solo := healthRegistry(t, nil, llm.BreakerPolicy{}, []string{"a:gpt-4o-mini"}, newUpstream(t, reply{status: 429, body: quotaBody}).provider(t, "a"))
	_, err = solo.Complete(context.Background(), userReq("hi"))
	if llm.KindOf(err) != llm.KindQuota || llm.IsRetryable(err) {
		t.Fatalf("err = %v (kind %s)", err, llm.KindOf(err))
	}
}

func TestModelNotFoundFailsOverWithoutRetry(t *testing.T) {
	for name, rep := range map[string]reply{
		"openai": {status: 404, body: modelBody},
		"ollama": {status: 404, body: ollamaModelBody},
	} {
		t.Run(name, func(t *testing.T) {
			a := newUpstream(t, rep)
			b := newUpstream(t, reply{body: completion("gpt-4o-mini", "from b", "", "stop", 5, 1, 0)})
			r := healthRegistry(t, nil, llm.BreakerPolicy{}, []string{"a:gpt-9-mini", "b:gpt-4o-mini"}, a.provider(t, "a"), b.provider(t, "b"))
			resp, err := r.Complete(context.Background(), userReq("hi"))
			if err != nil || resp.Provider != "b" || len(a.requests()) != 1 {
				t.Fatalf("%v %+v; a called %d times", err, resp, len(a.requests()))
			}
			if h := state(r, "a:gpt-9-mini"); h.LastErrorKind != llm.KindModelNotFound || h.State != llm.CircuitOpen {
				t.Fatalf("%+v", h)
			}
		})
	}
}

func TestContentPolicyNeitherRetriedNorFailedOver(t *testing.T) {
	a := newUpstream(t, reply{status: 400, body: policyBody})
	b := newUpstream(t, reply{body: completion("gpt-4o-mini", "never", "", "stop", 5, 1, 0)})
	r := healthRegistry(t, nil, llm.BreakerPolicy{Failures: 1}, []string{"a:gpt-4o-mini", "b:gpt-4o-mini"}, a.provider(t, "a"), b.provider(t, "b"))
	_, err := r.Complete(context.Background(), userReq("something vile"))
	if llm.KindOf(err) != llm.KindContentPolicy {
		t.Fatalf("err = %v (kind %s)", err, llm.KindOf(err))
	}
	if len(a.requests()) != 1 || len(b.requests()) != 0 {
		t.Fatalf("a policy refusal is the prompt's, not the provider's: a=%d b=%d", len(a.requests()), len(b.requests()))
	}
	if h := state(r, "a:gpt-4o-mini"); h.State != llm.CircuitClosed || h.ConsecutiveFailures != 0 {
		t.Fatalf("a policy refusal says nothing about a's health: %+v", h)
	}
}

func TestBreakerOpensAfterRepeatedFailuresProbesAndRecovers(t *testing.T) {
	// a fails with 500s (three calls, each retried three times: 9 answers), then one more
	// 500 for the first probe, then recovers.
	var replies []reply
	for range 10 {
		replies = append(replies, reply{status: 500, body: serverBody})
	}
	replies = append(replies, reply{body: completion("gpt-4o-mini", "a is back", "", "stop", 5, 1, 0)})
	a := newUpstream(t, replies...)
	b := newUpstream(t, reply{body: completion("gpt-4o-mini", "from b", "", "stop", 5, 1, 0)})
	const openFor = 100 * time.Millisecond
	r := healthRegistry(t, nil, llm.BreakerPolicy{Failures: 9, OpenFor: openFor}, []string{"a:gpt-4o-mini", "b:gpt-4o-mini"}, a.provider(t, "a"), b.provider(t, "b"))
	ctx := context.Background()
	for i := range 3 {
		resp, err := r.Complete(ctx, userReq("hi"))
		if err != nil || resp.Provider != "b" {
			t.Fatalf("call %d: %v %+v", i, err, resp)
		}
	}
	if n := len(a.requests()); n != 9 {
		t.Fatalf("a answered %d times, want 9 (3 calls x 3 attempts)", n)
	}
	if h := state(r, "a:gpt-4o-mini"); h.State != llm.CircuitOpen || h.ConsecutiveFailures != 0 && h.LastErrorKind != llm.KindProvider {
		t.Fatalf("after 9 consecutive failures a's circuit is open: %+v", h)
	}
	if resp, err := r.Complete(ctx, userReq("hi")); err != nil || resp.Provider != "b" || len(a.requests()) != 9 {
		t.Fatalf("open circuit skipped: %v %+v a=%d", err, resp, len(a.requests()))
	}
	waitState := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for state(r, "a:gpt-4o-mini").State != want {
			if time.Now().After(deadline) {
				t.Fatalf("a's circuit never became %s: %+v", want, state(r, "a:gpt-4o-mini"))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Half-open: one probe; it fails (the tenth 500), so the circuit opens again and the
	// call fails over without retrying a.
	waitState(llm.CircuitHalfOpen)
	if resp, err := r.Complete(ctx, userReq("probe")); err != nil || resp.Provider != "b" || len(a.requests()) != 10 {
		t.Fatalf("failed probe: %v %+v a=%d", err, resp, len(a.requests()))
	}
	if h := state(r, "a:gpt-4o-mini"); h.State != llm.CircuitOpen {
		t.Fatalf("a failed probe reopens the circuit: %+v", h)
	}
	// The next probe succeeds and closes it.
	waitState(llm.CircuitHalfOpen)
	resp, err := r.Complete(ctx, userReq("probe again"))
	if err != nil || resp.Provider != "a" || resp.Text != "a is back" {
		t.Fatalf("successful probe: %v %+v", err, resp)
	}
	if h := state(r, "a:gpt-4o-mini"); h.State != llm.CircuitClosed {
		t.Fatalf("a successful probe closes the circuit: %+v", h)
	}
}
