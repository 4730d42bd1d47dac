package client_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
)

// echoServer is a real MCP server with one tool, echo, answering what it was asked and the
// correlation id it received.
func echoServer(t testing.TB) *mcp.Server {
	t.Helper()
	s, err := mcpx.NewServer("lore", "test", "", mcpx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echo tool", Annotations: mcpx.ReadOnly("echo")},
		func(ctx context.Context, _ *mcp.CallToolRequest, in in) (*mcp.CallToolResult, out, error) {
			return nil, out{Said: in.Say, CorrelationID: mcpx.CorrelationID(ctx)}, nil
		})
	return s
}

// Worldgate's client asks for plain JSON answers (issue 41 item 4): every answer to its POSTs
// is one application/json body, not an SSE stream with a priming event stored for resumption;
// a client that does not ask (any standard MCP client, the conformance suite) still gets the
// resumable SSE stream.
func TestClientGetsJSONAnswersOthersGetStreams(t *testing.T) {
	var mu sync.Mutex
	types := map[string]int{}
	auth := mcpx.AuthConfig{StaticTokens: map[string]mcpx.Principal{token: {Subject: "agent", Scopes: []string{mcpx.ScopeLoreRead}}}}
	h := mcpx.HTTPHandler(echoServer(t), mcpx.HTTPOptions{Auth: auth, Scope: mcpx.ScopeLoreRead})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.Method == http.MethodPost {
			mu.Lock()
			types[w.Header().Get("Content-Type")]++
			mu.Unlock()
		}
	}))
	t.Cleanup(ts.Close)
	c, err := client.New(context.Background(), client.Config{Servers: []client.ServerConfig{{Name: "lore", URL: ts.URL, Token: token, Timeout: 5 * time.Second}},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := mcpx.WithCorrelationID(context.Background(), "corr-json")
	for range 3 {
		res, err := c.Call(ctx, "echo", map[string]any{"say": "hi"})
		if err != nil {
			t.Fatal(err)
		}
		var o out
		if err := res.Decode(&o); err != nil || o.Said != "hi" || o.CorrelationID != "corr-json" {
			t.Fatalf("echo answered %+v (%v)", o, err)
		}
	}
	mu.Lock()
	if types["text/event-stream"] != 0 || types["application/json"] < 4 { // initialize and three calls (202s carry no type)
		t.Fatalf("answers to Worldgate's client by content type: %v; want application/json only", types)
	}
	clear(types)
	mu.Unlock()

	// A standard client (the SDK's own transport, no header): SSE streams as before.
	cl := mcp.NewClient(&mcp.Implementation{Name: "standard", Version: "1"}, nil)
	sess, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: withToken{}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"say": "hey"}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if types["text/event-stream"] < 2 || types["application/json"] != 0 {
		t.Fatalf("answers to a standard client by content type: %v; want SSE streams", types)
	}
}

// A server in the worker's own process is called through the SDK's in-memory transport (issue
// 41 item 4): no HTTP, the correlation id still reaches the tool, and the server's tools are
// discovered as over HTTP.
func TestInProcessServer(t *testing.T) {
	c, err := client.New(context.Background(), client.Config{Servers: []client.ServerConfig{{Name: "lore", InProcess: echoServer(t), Timeout: 5 * time.Second}},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if tools := c.Tools(nil); len(tools) != 1 || tools[0].Name != "echo" || tools[0].Server != "lore" || !tools[0].ReadOnly {
		t.Fatalf("tools %+v", tools)
	}
	res, err := c.Call(mcpx.WithCorrelationID(context.Background(), "corr-mem"), "echo", map[string]any{"say": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	var o out
	if err := res.Decode(&o); err != nil || o.Said != "hi" || o.CorrelationID != "corr-mem" {
		t.Fatalf("echo answered %+v (%v)", o, err)
	}
	if _, err := client.New(context.Background(), client.Config{Servers: []client.ServerConfig{{Name: "none"}}}); err == nil {
		t.Fatal("a server with neither url, command nor in-process server was accepted")
	}
}

// withToken adds the test token, as any client holding one would.
type withToken struct{}

func (withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return http.DefaultTransport.RoundTrip(r)
}
