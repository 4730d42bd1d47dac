package llmsetup_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/scripted"
	"github.com/worldgate/worldgate/shared/llm"
)

func fastRetry() llm.RetryPolicy {
	return llm.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}
}

func req(p llm.Purpose) *llm.Request {
	return &llm.Request{Purpose: p, Messages: []llm.Message{{Role: llm.RoleUser, Content: `locationId: "loc-1"`}}}
}

func newRegistry(t *testing.T, cfg llm.Config, ps ...llm.Provider) *llm.Registry {
	t.Helper()
	r, err := llm.NewRegistry(cfg, llm.WithProviders(ps...))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRoutingByPurposeTierAndModel(t *testing.T) {
	cfg := llmsetup.DefaultConfig()
	r := newRegistry(t, cfg, scripted.New(scripted.Options{}))
	cases := []struct {
		req   *llm.Request
		model string
	}{
		{req(roles.PurposeAmbience), "scripted-small"},
		{req(roles.PurposeQuestSeed), "scripted-large"},
		{req("unknown_purpose"), "scripted-small"},
		{&llm.Request{Tier: "rich", Messages: req("").Messages}, "scripted-large"},
		{&llm.Request{Model: "scripted:custom-x", Messages: req("").Messages}, "custom-x"},
		{&llm.Request{Model: "scripted-large", Messages: req("").Messages}, "scripted-large"},
	}
	for _, c := range cases {
		resp, err := r.Complete(context.Background(), c.req)
		if err != nil {
			t.Fatalf("%+v: %v", c.req, err)
		}
		if resp.Model != c.model {
			t.Errorf("%+v routed to %s, want %s", c.req, resp.Model, c.model)
		}
	}
	_, err := r.Complete(context.Background(), &llm.Request{Tier: "gold", Messages: req("").Messages})
	if llm.KindOf(err) != llm.KindInvalid {
		t.Errorf("unknown tier: %v", err)
	}
	unpriced, err := r.Complete(context.Background(), &llm.Request{Model: "scripted:custom-x", Messages: req("").Messages})
	if err != nil || !unpriced.PriceMissing || unpriced.CostUSD != 0 {
		t.Errorf("unpriced model: %v %+v", err, unpriced)
	}
}

func TestRetriesInjectedFailures(t *testing.T) {
	cfg := llmsetup.DefaultConfig()
	cfg.Retry = fastRetry()
	p := scripted.New(scripted.Options{Fail: &llm.Error{Kind: llm.KindProvider, Status: 500}, FailTimes: 2})
	r := newRegistry(t, cfg, p)
	resp, err := r.Complete(context.Background(), req(roles.PurposeAmbience))
	if err != nil || resp.Attempts != 3 {
		t.Fatalf("%v %+v", err, resp)
	}
}

func TestNonRetryableIsNotRetried(t *testing.T) {
	cfg := llmsetup.DefaultConfig()
	cfg.Retry = fastRetry()
	cfg.Tiers["cheap"] = []string{"bad:scripted-small", "scripted:scripted-small"}
	bad := scripted.New(scripted.Options{Name: "bad", Fail: &llm.Error{Kind: llm.KindInvalid, Status: 400}, FailTimes: 5})
	r := newRegistry(t, cfg, bad, scripted.New(scripted.Options{}))
	_, err := r.Complete(context.Background(), req(roles.PurposeAmbience))
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindInvalid || le.Provider != "bad" || le.Retryable() {
		t.Fatalf("err = %v", err)
	}
	// One call consumed, no failover: the next call fails again.
	if _, err := r.Complete(context.Background(), req(roles.PurposeAmbience)); llm.KindOf(err) != llm.KindInvalid {
		t.Fatalf("second call: %v", err)
	}
}

func TestPerAttemptTimeoutThenFailover(t *testing.T) {
	cfg := llmsetup.DefaultConfig()
	cfg.Retry = llm.RetryPolicy{MaxAttempts: 1}
	cfg.Timeout = 20 * time.Millisecond
	cfg.Tiers["cheap"] = []string{"slow:scripted-small", "scripted:scripted-small"}
	slow := scripted.New(scripted.Options{Name: "slow", Delay: time.Hour})
	r := newRegistry(t, cfg, slow, scripted.New(scripted.Options{}))
	resp, err := r.Complete(context.Background(), req(roles.PurposeAmbience))
	if err != nil || resp.Provider != "scripted" || resp.Attempts != 2 {
		t.Fatalf("%v %+v", err, resp)
	}
	cfg.Tiers, cfg.Purposes, cfg.Degrade = map[string][]string{"cheap": {"slow:scripted-small"}}, nil, nil
	r = newRegistry(t, cfg, slow)
	_, err = r.Complete(context.Background(), req(roles.PurposeAmbience))
	if llm.KindOf(err) != llm.KindTimeout {
		t.Fatalf("want timeout, got %v", err)
	}
}

func TestCallerCancellationStopsRetries(t *testing.T) {
	cfg := llmsetup.DefaultConfig()
	cfg.Retry = llm.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Hour, MaxDelay: time.Hour}
	p := scripted.New(scripted.Options{Fail: &llm.Error{Kind: llm.KindUnavailable}, FailTimes: 100})
	r := newRegistry(t, cfg, p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Complete(ctx, req(roles.PurposeAmbience))
		done <- err
	}()
	cancel()
	err := <-done
	if llm.KindOf(err) != llm.KindCanceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("want canceled unwrapping to context.Canceled, got %v", err)
	}
}

func TestRetryAfterBeyondBoundNotWaited(t *testing.T) {
	cfg := llmsetup.DefaultConfig()
	cfg.Retry = llm.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxRetryAfter: time.Second}
	p := scripted.New(scripted.Options{Fail: &llm.Error{Kind: llm.KindRateLimit, Status: 429, RetryAfter: time.Hour}, FailTimes: 1})
	r := newRegistry(t, cfg, p)
	_, err := r.Complete(context.Background(), req(roles.PurposeAmbience))
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindRateLimit || le.RetryAfter != time.Hour {
		t.Fatalf("err = %v", err)
	}
}

func TestStreamThroughRegistry(t *testing.T) {
	r := newRegistry(t, llmsetup.DefaultConfig(), scripted.New(scripted.Options{}))
	var b strings.Builder
	resp, err := r.Stream(context.Background(), req(roles.PurposeAmbience), func(d llm.Delta) error {
		b.WriteString(d.Text)
		return nil
	})
	if err != nil || b.String() != resp.Text || resp.Text == "" || resp.CostUSD <= 0 {
		t.Fatalf("%v streamed %q resp %+v", err, b.String(), resp)
	}
	stop := errors.New("caller stops")
	_, err = r.Stream(context.Background(), req(roles.PurposeAmbience), func(llm.Delta) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("callback error should come back unchanged: %v", err)
	}
}

func TestToolsNeedToolCapableProvider(t *testing.T) {
	r := newRegistry(t, llmsetup.DefaultConfig(), noTools{scripted.New(scripted.Options{})})
	rq := req(roles.PurposeAmbience)
	rq.Tools = []llm.Tool{{Name: "get-location", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	if _, err := r.Complete(context.Background(), rq); llm.KindOf(err) != llm.KindInvalid {
		t.Fatalf("err = %v", err)
	}
}

type noTools struct{ *scripted.Provider }

func (n noTools) Capabilities() llm.Capabilities {
	c := n.Provider.Capabilities()
	c.Tools = false
	return c
}

func TestInvalidRequestsRejectedUpfront(t *testing.T) {
	r := newRegistry(t, llmsetup.DefaultConfig(), scripted.New(scripted.Options{}))
	bad := []*llm.Request{
		nil,
		{Purpose: roles.PurposeAmbience},
		{Messages: []llm.Message{{Role: "system", Content: "x"}}},
		{Messages: []llm.Message{{Role: llm.RoleTool, Content: "x"}}},
		{Messages: req("").Messages, Output: &llm.OutputSchema{Name: "x", Schema: json.RawMessage(`{"type":12}`)}},
	}
	for i, b := range bad {
		if _, err := r.Complete(context.Background(), b); llm.KindOf(err) != llm.KindInvalid {
			t.Errorf("case %d: want invalid_request, got %v", i, err)
		}
	}
}

func TestNewRegistryValidatesConfig(t *testing.T) {
	p := scripted.New(scripted.Options{})
	for _, cfg := range []llm.Config{
		{Tiers: map[string][]string{"cheap": {"nobody:m"}}},
		{Tiers: map[string][]string{"cheap": {"no-colon"}}},
		{Tiers: map[string][]string{"rich": {"scripted:m"}, "cheap": {"scripted:m"}}, DefaultTier: "gold"}, // default tier not configured
		{Tiers: map[string][]string{"cheap": {"scripted:m"}}, Purposes: map[llm.Purpose]string{"ambience": "gold"}},
	} {
		if _, err := llm.NewRegistry(cfg, llm.WithProviders(p)); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	if _, err := llm.NewRegistry(llmsetup.DefaultConfig(), llm.WithProviders(p, scripted.New(scripted.Options{}))); err == nil {
		t.Error("duplicate provider names accepted")
	}
}

func TestParseConfigYAML(t *testing.T) {
	cfg, err := llm.ParseConfig([]byte("tiers:\n  cheap: [scripted:scripted-small]\npurposes:\n  ambience: cheap\nretry:\n  max_attempts: 2\n  max_retry_after: 10s\ntimeout: 3s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Retry.MaxAttempts != 2 || cfg.Retry.MaxRetryAfter != 10*time.Second || cfg.Timeout != 3*time.Second {
		t.Fatalf("cfg = %+v", cfg)
	}
}
