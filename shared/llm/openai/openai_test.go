package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/llm/openai"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
)

// upstream is an httptest server speaking OpenAI's chat completions wire
// format. Each request gets the next scripted reply; every request is
// recorded with its arrival time.
type upstream struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	reqs    []recorded
	conns   atomic.Int32 // connections accepted
}

type reply struct {
	status  int
	headers map[string]string
	body    string   // JSON body
	sse     []string // SSE data payloads (a stream), "[DONE]" appended
}

type recorded struct {
	at   time.Time
	body map[string]any
	auth string
}

func newUpstream(t *testing.T, replies ...reply) *upstream {
	u := &upstream{t: t, replies: replies}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.srv.Start()
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	u.mu.Lock()
	u.reqs = append(u.reqs, recorded{at: at, body: body, auth: r.Header.Get("Authorization")})
	if r.URL.Path != "/v1/chat/completions" {
		u.mu.Unlock()
		http.Error(w, `{"error":{"message":"unknown path","type":"invalid_request_error"}}`, 404)
		return
	}
	var rep reply
	if len(u.replies) > 0 {
		rep = u.replies[0]
		if len(u.replies) > 1 {
			u.replies = u.replies[1:]
		}
	}
	u.mu.Unlock()
	for k, v := range rep.headers {
		w.Header().Set(k, v)
	}
	if rep.sse != nil {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, d := range append(rep.sse, "[DONE]") {
			fmt.Fprintf(w, "data: %s\n\n", d)
			w.(http.Flusher).Flush()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.status == 0 {
		rep.status = 200
	}
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

func (u *upstream) requests() []recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]recorded(nil), u.reqs...)
}

func (u *upstream) provider(t *testing.T, name string) *openai.Provider {
	p, err := openai.New(openai.Config{Name: name, BaseURL: u.srv.URL + "/v1", APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func completion(model, content string, toolCalls string, finish string, prompt, completionTok, cached int) string {
	c := "null"
	if content != "" {
		b, _ := json.Marshal(content)
		c = string(b)
	}
	tc := ""
	if toolCalls != "" {
		tc = `,"tool_calls":` + toolCalls
	}
	return fmt.Sprintf(`{"id":"chatcmpl-abc123","object":"chat.completion","created":1735689600,"model":%q,
"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null,"annotations":[]%s},"logprobs":null,"finish_reason":%q}],
"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},
"service_tier":"default","system_fingerprint":"fp_test"}`, model, c, tc, finish, prompt, completionTok, prompt+completionTok, cached)
}

func apiError(msg, typ, code string) string {
	return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":null,"code":%q}}`, msg, typ, code)
}

var testPrices = llm.DefaultPrices().With(mustPrices(`models:
  gpt-4o-mini: {input: 0.15, output: 0.60, cached_input: 0.075}
`))

func mustPrices(s string) *llm.PriceTable {
	t, err := llm.ParsePrices([]byte(s))
	if err != nil {
		panic(err)
	}
	return t
}

func registry(t *testing.T, reg prometheus.Registerer, tier []string, ps ...llm.Provider) *llm.Registry {
	t.Helper()
	cfg := llm.Config{
		Tiers:       map[string][]string{"cheap": tier},
		DefaultTier: "cheap",
		Retry:       llm.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxRetryAfter: 5 * time.Second},
		Timeout:     10 * time.Second,
	}
	opts := []llm.Option{llm.WithProviders(ps...), llm.WithPrices(testPrices)}
	if reg != nil {
		opts = append(opts, llm.WithMetrics(reg))
	}
	r, err := llm.NewRegistry(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var locTool = llm.Tool{Name: "get-location", Description: "Get a location", InputSchema: json.RawMessage(`{"type":"object","properties":{"locationId":{"type":"string"}},"required":["locationId"]}`)}

func userReq(content string) *llm.Request {
	return &llm.Request{Purpose: llm.Purpose("ambience"), System: "You are terse.", Messages: []llm.Message{{Role: llm.RoleUser, Content: content}}}
}

func TestToolCallRoundTrip(t *testing.T) {
	u := newUpstream(t,
		reply{body: completion("gpt-4o-mini-2024-07-18", "", `[{"id":"call_1","type":"function","function":{"name":"get-location","arguments":"{\"locationId\":\"loc-1\"}"}}]`, "tool_calls", 50, 10, 0)},
		reply{body: completion("gpt-4o-mini-2024-07-18", "The tavern hums.", "", "stop", 80, 6, 0)},
	)
	r := registry(t, nil, []string{"oa:gpt-4o-mini"}, u.provider(t, "oa"))
	req := userReq("Describe loc-1")
	req.Tools = []llm.Tool{locTool}
	temp, seed := 0.2, int64(7)
	req.Temperature, req.Seed, req.MaxTokens = &temp, &seed, 200

	resp, err := r.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != llm.FinishToolCalls || len(resp.ToolCalls) != 1 {
		t.Fatalf("want one tool call, got %+v", resp)
	}
	tc := resp.ToolCalls[0]
	if tc.ID != "call_1" || tc.Name != "get-location" || string(tc.Args) != `{"locationId":"loc-1"}` {
		t.Fatalf("tool call = %+v", tc)
	}
	first := u.requests()[0]
	if first.auth != "Bearer sk-test" {
		t.Errorf("Authorization = %q", first.auth)
	}
	tools := first.body["tools"].([]any)
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	if fn["name"] != "get-location" || fn["parameters"].(map[string]any)["required"] == nil {
		t.Errorf("tool definition on the wire: %v", fn)
	}
	if first.body["temperature"] != 0.2 || first.body["seed"] != 7.0 || first.body["max_tokens"] != 200.0 {
		t.Errorf("parameters on the wire: %v", first.body)
	}
	if msgs := first.body["messages"].([]any); msgs[0].(map[string]any)["role"] != "system" {
		t.Errorf("first message should be the system prompt: %v", msgs[0])
	}

	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: resp.ToolCalls},
		llm.Message{Role: llm.RoleTool, ToolCallID: "call_1", Content: `{"name":"The Gilded Goose"}`})
	resp, err = r.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "The tavern hums." || resp.FinishReason != llm.FinishStop {
		t.Fatalf("final = %+v", resp)
	}
	msgs := u.requests()[1].body["messages"].([]any)
	asst := msgs[2].(map[string]any)
	call := asst["tool_calls"].([]any)[0].(map[string]any)
	if asst["role"] != "assistant" || call["id"] != "call_1" || call["function"].(map[string]any)["arguments"] != `{"locationId":"loc-1"}` {
		t.Errorf("assistant tool call on the wire: %v", asst)
	}
	tool := msgs[3].(map[string]any)
	if tool["role"] != "tool" || tool["tool_call_id"] != "call_1" || tool["content"] != `{"name":"The Gilded Goose"}` {
		t.Errorf("tool result on the wire: %v", tool)
	}
	if resp.Provider != "oa" || resp.Model != "gpt-4o-mini-2024-07-18" || resp.Usage.PromptTokens != 80 {
		t.Errorf("provenance: %+v", resp)
	}
}

const moodSchema = `{"type":"object","properties":{"text":{"type":"string"},"mood":{"type":"string","enum":["calm","tense"]}},"required":["text","mood"],"additionalProperties":false}`

func TestJSONSchemaOutputNative(t *testing.T) {
	u := newUpstream(t, reply{body: completion("gpt-4o-mini", `{"text":"Quiet.","mood":"calm"}`, "", "stop", 30, 8, 0)})
	r := registry(t, nil, []string{"oa:gpt-4o-mini"}, u.provider(t, "oa"))
	req := userReq("Describe")
	req.Output = &llm.OutputSchema{Name: "ambience v1", Schema: json.RawMessage(moodSchema)}
	resp, err := r.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != `{"text":"Quiet.","mood":"calm"}` || resp.Repaired {
		t.Fatalf("resp = %+v", resp)
	}
	rf := u.requests()[0].body["response_format"].(map[string]any)
	js := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["name"] != "ambience_v1" || js["schema"].(map[string]any)["required"] == nil {
		t.Fatalf("response_format on the wire: %v", rf)
	}
}

func TestJSONSchemaRepairReprompt(t *testing.T) {
	u := newUpstream(t,
		reply{body: completion("gpt-4o-mini", `{"text":"Quiet.","mood":"sleepy"}`, "", "stop", 30, 8, 0)},
		reply{body: completion("gpt-4o-mini", "```json\n{\"text\":\"Quiet.\",\"mood\":\"calm\"}\n```", "", "stop", 60, 8, 0)},
	)
	r := registry(t, nil, []string{"oa:gpt-4o-mini"}, u.provider(t, "oa"))
	req := userReq("Describe")
	req.Output = &llm.OutputSchema{Name: "ambience", Schema: json.RawMessage(moodSchema)}
	resp, err := r.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Repaired || resp.Text != `{"text":"Quiet.","mood":"calm"}` || resp.Usage.PromptTokens != 90 || resp.Attempts != 2 {
		t.Fatalf("resp = %+v", resp)
	}
	msgs := u.requests()[1].body["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)["content"].(string)
	if !strings.Contains(last, "ambience") || !strings.Contains(last, "mood") {
		t.Errorf("repair prompt does not carry the validation error: %q", last)
	}
}

func sseChunk(delta string, finish string, usage string) string {
	f := "null"
	if finish != "" {
		f = fmt.Sprintf("%q", finish)
	}
	if usage != "" {
		return fmt.Sprintf(`{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_test","choices":[],"usage":%s}`, usage)
	}
	return fmt.Sprintf(`{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_test","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}`, delta, f)
}

func TestStreamingWithUsageAndCachedCost(t *testing.T) {
	reg := prometheus.NewRegistry()
	u := newUpstream(t, reply{sse: []string{
		sseChunk(`{"role":"assistant","content":"","refusal":null}`, "", ""),
		sseChunk(`{"content":"Fog "}`, "", ""),
		sseChunk(`{"content":"rolls in."}`, "", ""),
		sseChunk(`{}`, "stop", ""),
		sseChunk("", "", `{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200,"prompt_tokens_details":{"cached_tokens":400,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`),
	}})
	r := registry(t, reg, []string{"oa:gpt-4o-mini"}, u.provider(t, "oa"))
	var got []string
	resp, err := r.Stream(context.Background(), userReq("Describe"), func(d llm.Delta) error {
		got = append(got, d.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "") != "Fog rolls in." || resp.Text != "Fog rolls in." {
		t.Fatalf("deltas %q, text %q", got, resp.Text)
	}
	so := u.requests()[0].body["stream_options"].(map[string]any)
	if u.requests()[0].body["stream"] != true || so["include_usage"] != true {
		t.Fatalf("stream options on the wire: %v", u.requests()[0].body)
	}
	if resp.Usage != (llm.Usage{PromptTokens: 1000, CompletionTokens: 200, CachedPromptTokens: 400}) {
		t.Fatalf("usage = %+v", resp.Usage)
	}
	// 600 uncached × 0.15 + 400 cached × 0.075 + 200 × 0.60, per million.
	want := (600*0.15 + 400*0.075 + 200*0.60) / 1e6
	if math.Abs(resp.CostUSD-want) > 1e-12 || resp.PriceMissing {
		t.Fatalf("cost = %v, want %v", resp.CostUSD, want)
	}
	if v := metricstest.Sum(t, reg, "worldgate_ai_tokens_total", map[string]string{"type": "cached", "model": "gpt-4o-mini"}); v != 400 {
		t.Errorf("cached tokens metric = %v", v)
	}
	if v := metricstest.Sum(t, reg, "worldgate_ai_cost_usd_total", map[string]string{"purpose": "ambience"}); math.Abs(v-want) > 1e-12 {
		t.Errorf("cost metric = %v", v)
	}
	if v := metricstest.Sum(t, reg, "worldgate_ai_requests_total", map[string]string{"outcome": "ok", "provider": "oa"}); v != 1 {
		t.Errorf("requests metric = %v", v)
	}
}

func TestStreamingToolCalls(t *testing.T) {
	u := newUpstream(t, reply{sse: []string{
		sseChunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"get-location","arguments":""}}]}`, "", ""),
		sseChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"locationId\""}}]}`, "", ""),
		sseChunk(`{"tool_calls":[{"index":0,"function":{"arguments":":\"loc-2\"}"}}]}`, "", ""),
		sseChunk(`{}`, "tool_calls", ""),
		sseChunk("", "", `{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52}`),
	}})
	p := u.provider(t, "oa")
	req := userReq("Describe")
	req.Model = "gpt-4o-mini"
	req.Tools = []llm.Tool{locTool}
	resp, err := p.Stream(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "call_9" || string(resp.ToolCalls[0].Args) != `{"locationId":"loc-2"}` || resp.FinishReason != llm.FinishToolCalls {
		t.Fatalf("resp = %+v", resp)
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	u := newUpstream(t,
		reply{status: 429, headers: map[string]string{"Retry-After": "1"}, body: apiError("Rate limit reached for gpt-4o-mini", "requests", "rate_limit_exceeded")},
		reply{body: completion("gpt-4o-mini", "ok", "", "stop", 5, 1, 0)},
	)
	r := registry(t, nil, []string{"oa:gpt-4o-mini"}, u.provider(t, "oa"))
	resp, err := r.Complete(context.Background(), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := u.requests()
	if len(reqs) != 2 || resp.Attempts != 2 {
		t.Fatalf("want 2 upstream requests, got %d", len(reqs))
	}
	if gap := reqs[1].at.Sub(reqs[0].at); gap < time.Second {
		t.Fatalf("retried after %s, before the 1s Retry-After", gap)
	}
}

func TestRateLimitBeyondBoundFailsOver(t *testing.T) {
	a := newUpstream(t, reply{status: 429, headers: map[string]string{"Retry-After": "3600"}, body: apiError("slow down", "requests", "rate_limit_exceeded")})
	b := newUpstream(t, reply{body: completion("gpt-4o-mini", "from b", "", "stop", 5, 1, 0)})
	r := registry(t, nil, []string{"a:gpt-4o-mini", "b:gpt-4o-mini"}, a.provider(t, "a"), b.provider(t, "b"))
	resp, err := r.Complete(context.Background(), userReq("hi"))
	if err != nil || resp.Provider != "b" || len(a.requests()) != 1 {
		t.Fatalf("want immediate failover to b: %v %+v (a saw %d)", err, resp, len(a.requests()))
	}
}

func TestServerErrorThenSuccess(t *testing.T) {
	u := newUpstream(t,
		reply{status: 500, body: apiError("The server had an error while processing your request.", "server_error", "")},
		reply{body: completion("gpt-4o-mini", "recovered", "", "stop", 5, 1, 0)},
	)
	r := registry(t, nil, []string{"oa:gpt-4o-mini"}, u.provider(t, "oa"))
	resp, err := r.Complete(context.Background(), userReq("hi"))
	if err != nil || resp.Text != "recovered" || len(u.requests()) != 2 {
		t.Fatalf("%v %+v (%d requests)", err, resp, len(u.requests()))
	}
}

func TestContextLengthNormalized(t *testing.T) {
	a := newUpstream(t, reply{status: 400, body: apiError("This model's maximum context length is 128000 tokens. However, your messages resulted in 130001 tokens. Please reduce the length of the messages.", "invalid_request_error", "context_length_exceeded")})
	b := newUpstream(t, reply{body: completion("gpt-4o-mini", "never", "", "stop", 5, 1, 0)})
	r := registry(t, nil, []string{"a:gpt-4o-mini", "b:gpt-4o-mini"}, a.provider(t, "a"), b.provider(t, "b"))
	_, err := r.Complete(context.Background(), userReq("hi"))
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindContextLength || le.Status != 400 || le.Provider != "a" || le.Retryable() {
		t.Fatalf("err = %#v", err)
	}
	if len(a.requests()) != 1 || len(b.requests()) != 0 {
		t.Fatalf("context length must not be retried or failed over: a=%d b=%d", len(a.requests()), len(b.requests()))
	}
}

func TestAuthErrorNoRetryNoFailover(t *testing.T) {
	a := newUpstream(t, reply{status: 401, body: apiError("Incorrect API key provided: sk-test.", "invalid_request_error", "invalid_api_key")})
	b := newUpstream(t, reply{body: completion("gpt-4o-mini", "never", "", "stop", 5, 1, 0)})
	r := registry(t, nil, []string{"a:gpt-4o-mini", "b:gpt-4o-mini"}, a.provider(t, "a"), b.provider(t, "b"))
	_, err := r.Complete(context.Background(), userReq("hi"))
	if llm.KindOf(err) != llm.KindAuth || !strings.Contains(err.Error(), "Incorrect API key") {
		t.Fatalf("err = %v", err)
	}
	if len(a.requests()) != 1 || len(b.requests()) != 0 {
		t.Fatalf("auth errors must not loop: a=%d b=%d", len(a.requests()), len(b.requests()))
	}
}

func TestFailoverToNextProvider(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := newUpstream(t, reply{status: 503, body: apiError("overloaded", "server_error", "")})
	b := newUpstream(t, reply{body: completion("gpt-4o-mini", "from b", "", "stop", 5, 1, 0)})
	r := registry(t, reg, []string{"a:gpt-4o-mini", "b:gpt-4o-mini"}, a.provider(t, "a"), b.provider(t, "b"))
	resp, err := r.Complete(context.Background(), userReq("hi"))
	if err != nil || resp.Provider != "b" || resp.Text != "from b" {
		t.Fatalf("%v %+v", err, resp)
	}
	if len(a.requests()) != 3 || resp.Attempts != 4 {
		t.Fatalf("a should be tried MaxAttempts=3 times, got %d (attempts %d)", len(a.requests()), resp.Attempts)
	}
	if v := metricstest.Sum(t, reg, "worldgate_ai_requests_total", map[string]string{"provider": "a", "outcome": "unavailable"}); v != 3 {
		t.Errorf("unavailable outcomes for a = %v", v)
	}
}

func TestInvalidRequestNoFailover(t *testing.T) {
	a := newUpstream(t, reply{status: 400, body: apiError("Invalid value for 'temperature'", "invalid_request_error", "invalid_value")})
	b := newUpstream(t, reply{body: completion("gpt-4o-mini", "never", "", "stop", 5, 1, 0)})
	r := registry(t, nil, []string{"a:gpt-4o-mini", "b:gpt-4o-mini"}, a.provider(t, "a"), b.provider(t, "b"))
	_, err := r.Complete(context.Background(), userReq("hi"))
	if llm.KindOf(err) != llm.KindInvalid || len(b.requests()) != 0 {
		t.Fatalf("err = %v, b saw %d", err, len(b.requests()))
	}
}

func TestUnknownModelCostsZeroWithFlag(t *testing.T) {
	u := newUpstream(t, reply{body: completion("mystery-1", "hi", "", "stop", 100, 10, 0)})
	r := registry(t, nil, []string{"oa:mystery-1"}, u.provider(t, "oa"))
	resp, err := r.Complete(context.Background(), userReq("hi"))
	if err != nil || resp.CostUSD != 0 || !resp.PriceMissing {
		t.Fatalf("%v %+v", err, resp)
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p, _ := openai.New(openai.Config{Name: "gone", BaseURL: url + "/v1"})
	req := userReq("hi")
	req.Model = "gpt-4o-mini"
	_, err := p.Complete(context.Background(), req)
	if llm.KindOf(err) != llm.KindUnavailable {
		t.Fatalf("err = %v (%s)", err, llm.KindOf(err))
	}
}

// TestConcurrentCompletionsReuseConnections would have caught the provider dialling (and, against
// a real provider, handshaking TLS) for most requests: Go's default transport keeps two idle
// connections per host, so concurrent tasks beyond two closed theirs after each request.
func TestConcurrentCompletionsReuseConnections(t *testing.T) {
	u := newUpstream(t, reply{body: completion("gpt-4o-mini", "Hello.", "", "stop", 10, 2, 0)})
	r := registry(t, nil, []string{"oa:gpt-4o-mini"}, u.provider(t, "oa"))
	const width, rounds = 16, 20
	for range rounds {
		errs := make(chan error, width)
		for range width {
			go func() {
				_, err := r.Complete(context.Background(), userReq("Say hello"))
				errs <- err
			}()
		}
		for range width {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	// About width connections, reused round after round (loosely bounded: a request may dial
	// before a finished one has handed its connection back); without reuse, over 250.
	got := u.conns.Load()
	t.Logf("%d requests in rounds of %d opened %d connections", width*rounds, width, got)
	if got > 3*width {
		t.Fatalf("%d requests in rounds of %d opened %d connections; want at most %d", width*rounds, width, got, 3*width)
	}
}
