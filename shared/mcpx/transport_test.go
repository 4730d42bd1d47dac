package mcpx_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/worldgate/worldgate/shared/mcpx"
)

type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// post sends body to the echo server with a valid token and optional Origin.
func post(t *testing.T, url, origin, body string) (int, string, rpcReply) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer static-token-world-0001")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r rpcReply
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/json") {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("body %q is not JSON: %v", b, err)
		}
	} else if strings.HasPrefix(ct, "text/event-stream") {
		for _, line := range strings.Split(string(b), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				_ = json.Unmarshal([]byte(d), &r)
			}
		}
	}
	return resp.StatusCode, string(b), r
}

func TestHTTPOriginValidation(t *testing.T) {
	ts := newEchoServer(t, mcpx.RateLimit{}, nil, io.Discard)
	for _, tc := range []struct {
		origin string
		status int
	}{
		{"http://evil.example", http.StatusForbidden},
		{"http://localhost.evil.example:6274", http.StatusForbidden},
		{"null", http.StatusForbidden},
		{"", http.StatusOK},
		{"http://localhost:6274", http.StatusOK},
		{"http://127.0.0.1:8080", http.StatusOK},
	} {
		status, body, r := post(t, ts.URL, tc.origin, initialize)
		if status != tc.status {
			t.Errorf("Origin %q: status %d, want %d (%s)", tc.origin, status, tc.status, body)
			continue
		}
		if status == http.StatusForbidden && (r.Error == nil || r.Error.Code != mcpx.CodeForbidden || !strings.Contains(r.Error.Message, "origin")) {
			t.Errorf("Origin %q: body %s is not a JSON-RPC origin error", tc.origin, body)
		}
		if status == http.StatusOK && r.Error != nil {
			t.Errorf("Origin %q: %s", tc.origin, body)
		}
	}

	p, err := mcpx.NewOriginPolicy([]string{"https://editor.example", "http://localhost:*"})
	if err != nil {
		t.Fatal(err)
	}
	for o, want := range map[string]bool{"https://editor.example": true, "https://EDITOR.example/": true, "http://editor.example": false,
		"https://editor.example:444": false, "http://localhost": true, "http://localhost:1": true, "http://localhost:x": false, "": true} {
		if p.Allows(o) != want {
			t.Errorf("Allows(%q) = %v, want %v", o, !want, want)
		}
	}
	for _, bad := range []string{"editor.example", "https://e.example/path", "*.example:*"} {
		if _, err := mcpx.NewOriginPolicy([]string{bad}); err == nil {
			t.Errorf("NewOriginPolicy(%q) accepted", bad)
		}
	}
}

func TestHTTPJSONRPCErrors(t *testing.T) {
	ts := newEchoServer(t, mcpx.RateLimit{}, nil, io.Discard)
	for _, tc := range []struct {
		name, body string
		status     int
		code       int64
		id         string
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":1,"method":`, http.StatusBadRequest, mcpx.CodeParseError, "null"},
		{"bare word", `oops`, http.StatusBadRequest, mcpx.CodeParseError, "null"},
		{"not a message", `{"hello":"world"}`, http.StatusBadRequest, mcpx.CodeInvalidRequest, "null"},
		{"a number", `42`, http.StatusBadRequest, mcpx.CodeInvalidRequest, "null"},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"tools/destroy","params":{}}`, http.StatusOK, mcpx.CodeMethodNotFound, "7"},
		{"unknown method string id", `{"jsonrpc":"2.0","id":"a","method":"nope"}`, http.StatusOK, mcpx.CodeMethodNotFound, `"a"`},
	} {
		status, body, r := post(t, ts.URL, "", tc.body)
		if status != tc.status || r.Error == nil || r.Error.Code != tc.code || string(r.ID) != tc.id || r.JSONRPC != "2.0" {
			t.Errorf("%s: status %d body %s; want %d, code %d, id %s", tc.name, status, body, tc.status, tc.code, tc.id)
		}
	}
	// A known method still reaches the SDK.
	if status, body, r := post(t, ts.URL, "", initialize); status != http.StatusOK || r.Error != nil || len(r.Result) == 0 {
		t.Errorf("initialize: %d %s", status, body)
	}
}

// TestStdioSDKTransportEndsOnBadLine reproduces the failure the filter exists
// for: the SDK's own newline-delimited transport ends the session at the first
// line that is not JSON ("invalid character 'o' looking for beginning of
// value"; mcp-classify then exited 1). If a later SDK survives such a line,
// this test fails and FilteredStdio may be reconsidered.
func TestStdioSDKTransportEndsOnBadLine(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background(), &mcp.IOTransport{Reader: inR, Writer: outW}) }()
	_, _ = io.WriteString(inW, "oops\n")
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "invalid character 'o'") {
			t.Fatalf("SDK transport ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the SDK transport survived a bad line; FilteredStdio may no longer be needed")
	}
}

func TestStdioSurvivesAnyLine(t *testing.T) {
	s, err := mcpx.NewServer("world", "test", "", mcpx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Annotations: mcpx.ReadOnly("Echo"), InputSchema: mcpx.InputSchema[echoIn](nil)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Said: in.Say}, nil
		})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- mcpx.ServeIO(ctx, s, inR, outW) }()
	replies := make(chan rpcReply, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r rpcReply
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				replies <- r
			}
		}
	}()
	send := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("server gone: %v", err)
		}
	}
	next := func(what string) rpcReply {
		select {
		case r := <-replies:
			return r
		case err := <-done:
			t.Fatalf("%s: server ended: %v", what, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no reply", what)
		}
		return rpcReply{}
	}
	expectErr := func(line string, code int64, id string) {
		t.Helper()
		send(line)
		r := next(line)
		if r.Error == nil || r.Error.Code != code || string(r.ID) != id {
			t.Errorf("%q: reply %+v, want code %d id %s", line, r, code, id)
		}
	}
	expectErr("oops", mcpx.CodeParseError, "null")
	send(initialize)
	if r := next("initialize"); r.Error != nil || string(r.ID) != "1" {
		t.Fatalf("initialize: %+v", r)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	expectErr(`{"jsonrpc":"2.0","id":2,"method":`, mcpx.CodeParseError, "null")
	expectErr(`[1,2`, mcpx.CodeParseError, "null")
	expectErr(`"just a string"`, mcpx.CodeInvalidRequest, "null")
	expectErr(`{"jsonrpc":"2.0","id":3,"method":"tools/destroy"}`, mcpx.CodeMethodNotFound, "3")
	expectErr("\x00\xff binary", mcpx.CodeParseError, "null")
	expectErr(strings.Repeat("x", mcpx.MaxStdioLine+10), mcpx.CodeInvalidRequest, "null")
	send("   ") // blank lines are ignored
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"say":"still here"}}}`)
	r := next("tools/call")
	if r.Error != nil || string(r.ID) != "4" || !strings.Contains(string(r.Result), "still here") {
		t.Fatalf("tools/call after bad lines: %+v %s", r, r.Result)
	}
	_ = inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeIO after EOF: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("ServeIO did not end at EOF")
	}
}

// stdioPeer is a client's end of a server served by ServeIO over pipes.
type stdioPeer struct {
	t       *testing.T
	in      *io.PipeWriter
	replies chan rpcReply
	done    chan error
}

func serveOverPipes(t *testing.T, s *mcp.Server) *stdioPeer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	p := &stdioPeer{t: t, in: inW, replies: make(chan rpcReply, 16), done: make(chan error, 1)}
	go func() { p.done <- mcpx.ServeIO(ctx, s, inR, outW) }()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r rpcReply
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				p.replies <- r
			}
		}
	}()
	t.Cleanup(func() { _ = inW.Close(); cancel() })
	return p
}

// ask sends one line and returns the next reply; the test fails if the server ended.
func (p *stdioPeer) ask(line string) rpcReply {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatalf("%s: server gone: %v", line, err)
	}
	select {
	case r := <-p.replies:
		return r
	case err := <-p.done:
		p.t.Fatalf("%s: the server ended: %v", line, err)
	case <-time.After(10 * time.Second):
		p.t.Fatalf("%s: no reply", line)
	}
	return rpcReply{}
}

// A JSON array on stdio (issue 38: `[]`, `[1]`, `[{}]` each ended every MCP server) is
// answered -32600 with id null, and the session goes on; a batch of valid calls is refused the
// same way (MCP has no batching since 2025-06-18).
func TestStdioAnswersArraysAndKeepsServing(t *testing.T) {
	s := echoOnly(t)
	p := serveOverPipes(t, s)
	if r := p.ask(initialize); r.Error != nil || string(r.ID) != "1" {
		t.Fatalf("initialize: %+v", r)
	}
	if _, err := io.WriteString(p.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`[]`, `[1]`, `[{}]`, ` [ ] `, `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		`[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"say":"batched"}}}]`} {
		r := p.ask(line)
		if r.Error == nil || r.Error.Code != mcpx.CodeInvalidRequest || string(r.ID) != "null" || r.JSONRPC != "2.0" || !strings.Contains(r.Error.Message, "batch") {
			t.Errorf("%s: reply %+v, want -32600 with id null naming batches", line, r)
		}
	}
	r := p.ask(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"say":"still here"}}}`)
	if r.Error != nil || string(r.ID) != "4" || !strings.Contains(string(r.Result), "still here") {
		t.Fatalf("tools/call after arrays: %+v %s", r, r.Result)
	}
}

// Over Streamable HTTP an array body is a JSON-RPC error body (application/json, -32600, id
// null, HTTP 400), not the SDK's plain text, and the server answers the next request.
func TestHTTPAnswersArraysAsJSONRPC(t *testing.T) {
	ts := newEchoServer(t, mcpx.RateLimit{}, nil, io.Discard)
	for _, body := range []string{`[]`, `[1]`, `[{}]`, `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer static-token-world-0001")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var r rpcReply
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || json.Unmarshal(raw, &r) != nil ||
			r.JSONRPC != "2.0" || r.Error == nil || r.Error.Code != mcpx.CodeInvalidRequest || string(r.ID) != "null" {
			t.Errorf("%s: %d %q %s; want 400 application/json with a -32600 error, id null", body, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
		}
	}
	cs, err := connect(t, ts.URL, "static-token-world-0001", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"say": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("a call after the arrays: %v %+v", err, res)
	}
}

// echoOnly is a server with the echo tool and no authentication (stdio).
func echoOnly(t *testing.T) *mcp.Server { return echoOnlyWith(t, nil) }

// echoOnlyWith is echoOnly with its metrics registered on reg.
func echoOnlyWith(t *testing.T, reg prometheus.Registerer) *mcp.Server {
	t.Helper()
	s, err := mcpx.NewServer("world", "test", "", mcpx.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Annotations: mcpx.ReadOnly("Echo"), InputSchema: mcpx.InputSchema[echoIn](nil)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Said: in.Say}, nil
		})
	return s
}
