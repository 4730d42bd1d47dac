package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
)

type in struct {
	Say string `json:"say"`
}
type out struct {
	Said          string `json:"said"`
	CorrelationID string `json:"correlationId"`
}

const token = "client-test-token-000001"

// testServer is a real MCP server over Streamable HTTP on a fixed address
// that can be stopped and started again.
type testServer struct {
	t     testing.TB
	addr  string
	srv   *http.Server
	slow  atomic.Int32 // calls of "slow"
	calls atomic.Int32
	conns atomic.Int32 // connections accepted
}

func (ts *testServer) start() {
	ts.t.Helper()
	auth := mcpx.AuthConfig{StaticTokens: map[string]mcpx.Principal{token: {Subject: "agent", Scopes: []string{mcpx.ScopeLoreRead}}}}
	s, err := mcpx.NewServer("lore", "test", "", mcpx.Options{Auth: auth})
	if err != nil {
		ts.t.Fatal(err)
	}
	for _, name := range []string{"echo", "secret-tool"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: name + " tool", Annotations: mcpx.ReadOnly(name)},
			func(ctx context.Context, _ *mcp.CallToolRequest, in in) (*mcp.CallToolResult, out, error) {
				ts.calls.Add(1)
				if in.Say == "" {
					return nil, out{}, mcpx.InvalidInput("say must not be empty")
				}
				return nil, out{Said: in.Say, CorrelationID: mcpx.CorrelationID(ctx)}, nil
			})
	}
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Annotations: mcpx.ReadOnly("slow")},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ in) (*mcp.CallToolResult, out, error) {
			ts.slow.Add(1)
			select { // longer than the client's 300ms timeout
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			return nil, out{}, errors.New("too late")
		})
	addr := ts.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err = net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // port still in TIME_WAIT/closing
	}
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	ts.srv = &http.Server{Handler: mcpx.HTTPHandler(s, mcpx.HTTPOptions{Auth: auth, Scope: mcpx.ScopeLoreRead}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				ts.conns.Add(1)
			}
		}}
	go func() {
		if err := ts.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			ts.t.Errorf("the test MCP server stopped: %v", err)
		}
	}()
}

func (ts *testServer) stop() {
	ts.srv.Close() // kills every connection: the server is gone mid-session
}

func (ts *testServer) url() string { return "http://" + ts.addr }

func newClient(t testing.TB, ts *testServer, allow []string, timeout time.Duration) *client.Client {
	t.Helper()
	c, err := client.New(context.Background(), client.Config{
		Servers:          []client.ServerConfig{{Name: "lore", URL: ts.url(), Token: token, Timeout: timeout}},
		AllowList:        allow,
		HealthInterval:   200 * time.Millisecond,
		ReconnectBackoff: 50 * time.Millisecond,
		Logger:           slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

func TestDiscoveryAllowListAndErrors(t *testing.T) {
	ts := &testServer{t: t}
	ts.start()
	t.Cleanup(ts.stop)
	c := newClient(t, ts, []string{"echo", "slow"}, 300*time.Millisecond)

	tools := c.Tools(nil)
	if len(tools) != 2 || tools[0].Name != "echo" || tools[1].Name != "slow" {
		t.Fatalf("tools = %+v", tools)
	}
	if !tools[0].ReadOnly || tools[0].Server != "lore" || len(tools[0].InputSchema) == 0 {
		t.Fatalf("tool metadata: %+v", tools[0])
	}
	if got := c.Tools([]string{"echo"}); len(got) != 1 || got[0].Name != "echo" {
		t.Fatalf("filtered tools = %+v", got)
	}

	ctx := mcpx.WithCorrelationID(context.Background(), "corr-123")
	res, err := c.Call(ctx, "echo", map[string]any{"say": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	var o out
	if err := res.Decode(&o); err != nil || o.Said != "hello" || o.CorrelationID != "corr-123" {
		t.Fatalf("result %+v %v text=%q", o, err, res.Text)
	}

	// Outside the allow-list: refused locally, nothing sent.
	before := ts.calls.Load()
	_, err = c.Call(ctx, "secret-tool", map[string]any{"say": "x"})
	if !errors.Is(err, client.ErrNotAllowed) || ts.calls.Load() != before {
		t.Fatalf("secret-tool: %v (calls %d→%d)", err, before, ts.calls.Load())
	}
	_, err = c.Role([]string{"slow"}).Call(ctx, "echo", map[string]any{"say": "x"})
	if client.KindOf(err) != client.KindNotAllowed {
		t.Fatalf("role call: %v", err)
	}

	// Tool error: typed, with the server's message, not retried.
	before = ts.calls.Load()
	_, err = c.Call(ctx, "echo", map[string]any{"say": ""})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Kind != client.KindToolError || ce.Message != "invalid input: say must not be empty" || ts.calls.Load() != before+1 {
		t.Fatalf("tool error: %v", err)
	}

	// Timeout: retried once, then typed.
	_, err = c.Call(ctx, "slow", map[string]any{"say": "x"})
	if !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("slow: %v", err)
	}
	if n := ts.slow.Load(); n != 2 {
		t.Fatalf("slow called %d times, want 2 (one retry)", n)
	}
	if h := c.Health(); len(h) != 1 || !h[0].Available || h[0].Tools != 3 {
		t.Fatalf("health = %+v", h)
	}
}

func TestServerKilledMidSessionRecovers(t *testing.T) {
	ts := &testServer{t: t}
	ts.start()
	c := newClient(t, ts, nil, 5*time.Second)
	ctx := context.Background()
	if _, err := c.Call(ctx, "echo", map[string]any{"say": "before"}); err != nil {
		t.Fatal(err)
	}

	ts.stop()
	_, err := c.Call(ctx, "echo", map[string]any{"say": "during"})
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("call while down: %v", err)
	}
	waitFor(t, "server reported unavailable", func() bool { return !c.Health()[0].Available })
	if len(c.Tools(nil)) != 0 {
		t.Fatalf("tools of a down server are still offered: %+v", c.Tools(nil))
	}

	ts.start() // same address
	t.Cleanup(ts.stop)
	waitFor(t, "server reconnected", func() bool { return c.Health()[0].Available })
	h := c.Health()[0]
	if h.Reconnects < 1 || h.Tools != 3 {
		t.Fatalf("health after reconnect: %+v", h)
	}
	res, err := c.Call(ctx, "echo", map[string]any{"say": "after"})
	if err != nil {
		t.Fatal(err)
	}
	var o out
	if err := res.Decode(&o); err != nil || o.Said != "after" {
		t.Fatalf("after: %+v %v", o, err)
	}
}

func TestUnreachableAtStartAndBadToken(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c, err := client.New(context.Background(), client.Config{
		Servers:          []client.ServerConfig{{Name: "world", URL: "http://" + addr}},
		ReconnectBackoff: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err) // an unreachable server is not a configuration error
	}
	defer c.Close()
	if h := c.Health()[0]; h.Available || h.LastError == "" {
		t.Fatalf("health = %+v", h)
	}
	if _, err := c.Call(context.Background(), "get-location", nil); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("call: %v", err)
	}

	ts := &testServer{t: t}
	ts.start()
	t.Cleanup(ts.stop)
	c2, err := client.New(context.Background(), client.Config{Servers: []client.ServerConfig{{Name: "lore", URL: ts.url(), Token: "wrong-token-wrong-token"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if h := c2.Health()[0]; h.Available || h.LastError == "" {
		t.Fatalf("health with bad token = %+v", h)
	}

	if _, err := client.New(context.Background(), client.Config{Servers: []client.ServerConfig{{Name: "x"}}}); err == nil {
		t.Fatal("server without url or command accepted")
	}
}

// TestConcurrentCallsReuseConnections would have caught a worker dialling a new TCP connection
// for most of its calls: with Go's default transport (two idle connections per host) every
// burst of concurrent calls beyond two closed its connections after use and dialled again.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	ts := &testServer{t: t}
	ts.start()
	t.Cleanup(ts.stop)
	c := newClient(t, ts, nil, 5*time.Second)
	const width, rounds = 16, 20
	before := ts.conns.Load()
	for range rounds {
		errs := make(chan error, width)
		for range width {
			go func() {
				_, err := c.Call(context.Background(), "echo", map[string]any{"say": "hi"})
				errs <- err
			}()
		}
		for range width {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each round needs about width connections; kept idle, the next rounds reuse them. A call
	// may still dial when it starts before a finished one has handed its connection back (more
	// so under the race detector), so the bound is loose: without reuse every round beyond the
	// first dialled width-2 connections (over 250 here).
	dialled := ts.conns.Load() - before
	t.Logf("%d calls in rounds of %d dialled %d connections", width*rounds, width, dialled)
	if dialled > 4*width {
		t.Fatalf("%d calls in rounds of %d dialled %d new connections; want at most %d (idle connections kept for reuse)",
			width*rounds, width, dialled, 4*width)
	}
}

// BenchmarkCallsInParallel is a worker's pattern: goroutines calling one MCP server at once. It
// measures the client's and the server's CPU per call (both run in this process) and how many
// connections each call dialled.
func BenchmarkCallsInParallel(b *testing.B) {
	ts := &testServer{t: b}
	ts.start()
	b.Cleanup(ts.stop)
	c := newClient(b, ts, nil, 5*time.Second)
	before := ts.conns.Load()
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Call(context.Background(), "echo", map[string]any{"say": "hi"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(ts.conns.Load()-before)/float64(b.N), "dials/op")
}
