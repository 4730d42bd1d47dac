package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/llm/anthropic"
)

// upstream speaks the Anthropic Messages wire format: JSON bodies, or SSE
// event streams (event: <type> / data: <json>).
type upstream struct {
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	reqs    []recorded
}

type reply struct {
	status  int
	headers map[string]string
	body    string
	events  [][2]string // {event type, data}
}

type recorded struct {
	at     time.Time
	body   map[string]any
	apiKey string
}

func newUpstream(t *testing.T, replies ...reply) *upstream {
	u := &upstream{replies: replies}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	u.mu.Lock()
	u.reqs = append(u.reqs, recorded{at: at, body: body, apiKey: r.Header.Get("X-Api-Key")})
	var rep reply
	if len(u.replies) > 0 {
		rep = u.replies[0]
		if len(u.replies) > 1 {
			u.replies = u.replies[1:]
		}
	}
	u.mu.Unlock()
	if r.URL.Path != "/v1/messages" {
		w.WriteHeader(404)
		_, _ = io.WriteString(w, errBody("not_found_error", "Not found"))
		return
	}
	for k, v := range rep.headers {
		w.Header().Set(k, v)
	}
	if rep.events != nil {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, e := range rep.events {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e[0], e[1])
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

func (u *upstream) provider(t *testing.T, name string) *anthropic.Provider {
	p, err := anthropic.New(anthropic.Config{Name: name, BaseURL: u.srv.URL + "/", APIKey: "sk-ant-test"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func message(content string, stop string, in, out, cacheRead int) string {
	return fmt.Sprintf(`{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001",
"content":%s,"stop_reason":%q,"stop_sequence":null,
"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":%d,"output_tokens":%d,"service_tier":"standard"}}`,
		content, stop, in, cacheRead, out)
}

func errBody(typ, msg string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`, typ, msg)
}

func registry(t *testing.T, tier []string, ps ...llm.Provider) *llm.Registry {
	t.Helper()
	r, err := llm.NewRegistry(llm.Config{
		Tiers:   map[string][]string{"cheap": tier},
		Retry:   llm.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxRetryAfter: 5 * time.Second},
		Timeout: 10 * time.Second,
	}, llm.WithProviders(ps...))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var locTool = llm.Tool{Name: "get-location", Description: "Get a location", InputSchema: json.RawMessage(`{"type":"object","properties":{"locationId":{"type":"string"}},"required":["locationId"],"additionalProperties":false}`)}

func userReq(content string) *llm.Request {
	return &llm.Request{Purpose: llm.Purpose("npc_dialogue"), System: "You are Marta.", Messages: []llm.Message{{Role: llm.RoleUser, Content: content}}}
}

func TestToolUseRoundTrip(t *testing.T) {
	u := newUpstream(t,
		reply{body: message(`[{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_01A","name":"get-location","input":{"locationId":"loc-1"}},{"type":"tool_use","id":"toolu_01B","name":"get-location","input":{"locationId":"loc-2"}}]`, "tool_use", 120, 40, 0)},
		reply{body: message(`[{"type":"text","text":"Welcome to the Goose."}]`, "end_turn", 200, 8, 0)},
	)
	r := registry(t, []string{"an:claude-haiku-4-5"}, u.provider(t, "an"))
	req := userReq("Hello")
	req.Tools = []llm.Tool{locTool}
	resp, err := r.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != llm.FinishToolCalls || len(resp.ToolCalls) != 2 || resp.ToolCalls[1].ID != "toolu_01B" || string(resp.ToolCalls[0].Args) != `{"locationId":"loc-1"}` {
		t.Fatalf("resp = %+v", resp)
	}
	first := u.requests()[0]
	if first.apiKey != "sk-ant-test" || first.body["max_tokens"] != float64(anthropic.DefaultMaxTokens) {
		t.Errorf("request: key %q, body %v", first.apiKey, first.body)
	}
	tool := first.body["tools"].([]any)[0].(map[string]any)
	is := tool["input_schema"].(map[string]any)
	if tool["name"] != "get-location" || is["type"] != "object" || is["additionalProperties"] != false || is["required"] == nil {
		t.Errorf("tool on the wire: %v", tool)
	}
	if sys := first.body["system"].([]any)[0].(map[string]any); sys["text"] != "You are Marta." {
		t.Errorf("system on the wire: %v", sys)
	}

	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: "Let me check.", ToolCalls: resp.ToolCalls},
		llm.Message{Role: llm.RoleTool, ToolCallID: "toolu_01A", Content: `{"name":"The Gilded Goose"}`},
		llm.Message{Role: llm.RoleTool, ToolCallID: "toolu_01B", Content: `not found`, IsError: true},
	)
	resp, err = r.Complete(context.Background(), req)
	if err != nil || resp.Text != "Welcome to the Goose." || resp.FinishReason != llm.FinishStop {
		t.Fatalf("%v %+v", err, resp)
	}
	msgs := u.requests()[1].body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("want user, assistant, user(tool results); got %d messages: %v", len(msgs), msgs)
	}
	asst := msgs[1].(map[string]any)["content"].([]any)
	if asst[1].(map[string]any)["type"] != "tool_use" || asst[1].(map[string]any)["id"] != "toolu_01A" {
		t.Errorf("assistant blocks: %v", asst)
	}
	results := msgs[2].(map[string]any)
	blocks := results["content"].([]any)
	if results["role"] != "user" || len(blocks) != 2 || blocks[0].(map[string]any)["tool_use_id"] != "toolu_01A" || blocks[1].(map[string]any)["is_error"] != true {
		t.Errorf("tool results: %v", results)
	}
}

const lineSchema = `{"type":"object","properties":{"line":{"type":"string"},"intent":{"type":"string","enum":["greet","warn"]}},"required":["line","intent"],"additionalProperties":false}`

func TestJSONOutputViaForcedTool(t *testing.T) {
	u := newUpstream(t, reply{body: message(`[{"type":"tool_use","id":"toolu_9","name":"npc_line","input":{"line":"Well met.","intent":"greet"}}]`, "tool_use", 90, 20, 0)})
	r := registry(t, []string{"an:claude-haiku-4-5"}, u.provider(t, "an"))
	req := userReq("Hello")
	req.Output = &llm.OutputSchema{Name: "npc line", Schema: json.RawMessage(lineSchema)}
	resp, err := r.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(resp.Text), &got); err != nil || got["intent"] != "greet" || len(resp.ToolCalls) != 0 || resp.FinishReason != llm.FinishStop {
		t.Fatalf("resp = %+v", resp)
	}
	body := u.requests()[0].body
	tc := body["tool_choice"].(map[string]any)
	if tc["type"] != "tool" || tc["name"] != "npc_line" {
		t.Fatalf("tool_choice on the wire: %v", tc)
	}
}

func TestJSONOutputWithToolsByInstructionAndRepair(t *testing.T) {
	u := newUpstream(t,
		reply{body: message(`[{"type":"text","text":"Sure! {\"line\":\"Hi\"}"}]`, "end_turn", 90, 20, 0)},
		reply{body: message(`[{"type":"text","text":"{\"line\":\"Hi\",\"intent\":\"greet\"}"}]`, "end_turn", 130, 10, 0)},
	)
	r := registry(t, []string{"an:claude-haiku-4-5"}, u.provider(t, "an"))
	req := userReq("Hello")
	req.Tools = []llm.Tool{locTool}
	req.Output = &llm.OutputSchema{Name: "npc_line", Schema: json.RawMessage(lineSchema)}
	resp, err := r.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Repaired || resp.Text != `{"line":"Hi","intent":"greet"}` {
		t.Fatalf("resp = %+v", resp)
	}
	sys := u.requests()[0].body["system"].([]any)[0].(map[string]any)["text"].(string)
	if !strings.Contains(sys, "JSON Schema") || !strings.Contains(sys, `"intent"`) {
		t.Errorf("schema instruction missing from system: %q", sys)
	}
	msgs := u.requests()[1].body["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
	if !strings.Contains(last, "intent") {
		t.Errorf("repair prompt lacks the validation error: %q", last)
	}
}

func streamEvents(cacheRead int) [][2]string {
	return [][2]string{
		{"message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY","type":"message","role":"assistant","content":[],"model":"claude-haiku-4-5-20251001","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":600,"cache_creation_input_tokens":0,"cache_read_input_tokens":%d,"output_tokens":1}}}`, cacheRead)},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"ping", `{"type": "ping"}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Mind the "}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"north road."}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_S1","name":"get-location","input":{}}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"locationId\": "}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"loc-3\"}"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":1}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":15}}`},
		{"message_stop", `{"type":"message_stop"}`},
	}
}

func TestStreamingWithUsageAndCachedCost(t *testing.T) {
	u := newUpstream(t, reply{events: streamEvents(400)})
	r := registry(t, []string{"an:claude-haiku-4-5"}, u.provider(t, "an"))
	req := userReq("Hello")
	req.Tools = []llm.Tool{locTool}
	var text, args strings.Builder
	resp, err := r.Stream(context.Background(), req, func(d llm.Delta) error {
		text.WriteString(d.Text)
		args.WriteString(d.ToolArgs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if u.requests()[0].body["stream"] != true {
		t.Fatalf("not a streaming request: %v", u.requests()[0].body)
	}
	if text.String() != "Mind the north road." || resp.Text != "Mind the north road." || args.String() != `{"locationId": "loc-3"}` {
		t.Fatalf("text %q args %q resp %+v", text.String(), args.String(), resp)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "toolu_S1" || resp.FinishReason != llm.FinishToolCalls {
		t.Fatalf("tool calls %+v", resp.ToolCalls)
	}
	if resp.Usage != (llm.Usage{PromptTokens: 1000, CompletionTokens: 15, CachedPromptTokens: 400}) {
		t.Fatalf("usage = %+v", resp.Usage)
	}
	// embedded prices for claude-haiku-4-5: input 1.00, cached 0.10, output 5.00 per million.
	want := (600*1.00 + 400*0.10 + 15*5.00) / 1e6
	if math.Abs(resp.CostUSD-want) > 1e-12 {
		t.Fatalf("cost = %v, want %v", resp.CostUSD, want)
	}
}

func TestStreamErrorEventNormalized(t *testing.T) {
	u := newUpstream(t, reply{events: [][2]string{
		{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-haiku-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`},
		{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
	}})
	p := u.provider(t, "an")
	req := userReq("Hello")
	req.Model = "claude-haiku-4-5"
	_, err := p.Stream(context.Background(), req, nil)
	if llm.KindOf(err) != llm.KindUnavailable {
		t.Fatalf("err = %v", err)
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	u := newUpstream(t,
		reply{status: 429, headers: map[string]string{"Retry-After": "1"}, body: errBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")},
		reply{body: message(`[{"type":"text","text":"ok"}]`, "end_turn", 5, 1, 0)},
	)
	r := registry(t, []string{"an:claude-haiku-4-5"}, u.provider(t, "an"))
	if _, err := r.Complete(context.Background(), userReq("hi")); err != nil {
		t.Fatal(err)
	}
	reqs := u.requests()
	if len(reqs) != 2 {
		t.Fatalf("want 2 requests, got %d", len(reqs))
	}
	if gap := reqs[1].at.Sub(reqs[0].at); gap < time.Second {
		t.Fatalf("retried after %s, before the 1s Retry-After", gap)
	}
}

func TestServerErrorThenSuccess(t *testing.T) {
	u := newUpstream(t,
		reply{status: 500, body: errBody("api_error", "Internal server error")},
		reply{body: message(`[{"type":"text","text":"recovered"}]`, "end_turn", 5, 1, 0)},
	)
	r := registry(t, []string{"an:claude-haiku-4-5"}, u.provider(t, "an"))
	resp, err := r.Complete(context.Background(), userReq("hi"))
	if err != nil || resp.Text != "recovered" || resp.Attempts != 2 {
		t.Fatalf("%v %+v", err, resp)
	}
}

func TestPromptTooLongIsContextLength(t *testing.T) {
	a := newUpstream(t, reply{status: 400, body: errBody("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum")})
	b := newUpstream(t, reply{body: message(`[{"type":"text","text":"never"}]`, "end_turn", 5, 1, 0)})
	r := registry(t, []string{"a:claude-haiku-4-5", "b:claude-haiku-4-5"}, a.provider(t, "a"), b.provider(t, "b"))
	_, err := r.Complete(context.Background(), userReq("hi"))
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindContextLength || le.Status != 400 || !strings.Contains(le.Message, "prompt is too long") {
		t.Fatalf("err = %v", err)
	}
	if len(a.requests()) != 1 || len(b.requests()) != 0 {
		t.Fatalf("a=%d b=%d", len(a.requests()), len(b.requests()))
	}
}

func TestAuthErrorNoRetryNoFailover(t *testing.T) {
	a := newUpstream(t, reply{status: 401, body: errBody("authentication_error", "invalid x-api-key")})
	b := newUpstream(t, reply{body: message(`[{"type":"text","text":"never"}]`, "end_turn", 5, 1, 0)})
	r := registry(t, []string{"a:claude-haiku-4-5", "b:claude-haiku-4-5"}, a.provider(t, "a"), b.provider(t, "b"))
	_, err := r.Complete(context.Background(), userReq("hi"))
	if llm.KindOf(err) != llm.KindAuth || len(a.requests()) != 1 || len(b.requests()) != 0 {
		t.Fatalf("err = %v; a=%d b=%d", err, len(a.requests()), len(b.requests()))
	}
}

func TestOverloadedFailsOver(t *testing.T) {
	a := newUpstream(t, reply{status: 529, body: errBody("overloaded_error", "Overloaded")})
	b := newUpstream(t, reply{body: message(`[{"type":"text","text":"from b"}]`, "end_turn", 5, 1, 0)})
	r := registry(t, []string{"a:claude-haiku-4-5", "b:claude-haiku-4-5"}, a.provider(t, "a"), b.provider(t, "b"))
	resp, err := r.Complete(context.Background(), userReq("hi"))
	if err != nil || resp.Provider != "b" || len(a.requests()) != 3 {
		t.Fatalf("%v %+v a=%d", err, resp, len(a.requests()))
	}
}
