package stack_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/worldgate/worldgate/services/worldgate/stack"
	"github.com/worldgate/worldgate/shared/mcpx"
)

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// A flood with the token `worldgate dev` publishes (endpoints.json "mcp.token") is rate-limited
// on its own: the in-process workers, with their own token, are still answered (issue 38: the
// outside flood exhausted the bucket the workers shared with it).
func TestOutsideFloodLeavesTheWorkersBudget(t *testing.T) {
	ctx := context.Background()
	st, err := stack.Start(ctx, stack.Config{DataDir: t.TempDir(), MCPRateLimit: &mcpx.RateLimit{PerSecond: 0.001, Burst: 3}}, []stack.Part{stack.MCP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Stop)
	published, _ := st.Endpoints["mcp.token"].(string)
	if published == "" || published == st.MCPToken {
		t.Fatal("the published MCP token is the workers' own")
	}
	outside, err := mcp.NewClient(&mcp.Implementation{Name: "flood", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: st.MCPURLs["classify"], HTTPClient: &http.Client{Transport: bearer(published)}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	limited := 0
	for range 10 {
		res, err := outside.CallTool(ctx, &mcp.CallToolParams{Name: "classify-intent", Arguments: map[string]any{"utterance": "hello there"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError && strings.Contains(res.Content[0].(*mcp.TextContent).Text, "rate limit exceeded") {
			limited++
		}
	}
	if limited != 7 {
		t.Fatalf("%d of 10 flooding calls rate-limited, want 7 (burst 3)", limited)
	}
	workers, err := st.MCPClient(ctx, "classify")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workers.Call(ctx, "classify-intent", map[string]any{"utterance": "hello there"}); err != nil {
		t.Fatalf("the workers during the flood: %v", err)
	}
}

// The stack's own workers call its MCP servers in process (issue 41 item 4): with every server's
// HTTP address made unreachable, a worker's client still discovers and calls their tools.
func TestWorkersCallTheServersInProcess(t *testing.T) {
	ctx := context.Background()
	st, err := stack.Start(ctx, stack.Config{DataDir: t.TempDir()}, []stack.Part{stack.MCP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Stop)
	for name := range st.MCPServers {
		st.MCPURLs[name] = "http://127.0.0.1:1/mcp/unreachable"
	}
	workers, err := st.MCPClient(ctx, "world", "lore", "classify")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range workers.Health() {
		if !h.Available || h.Tools == 0 {
			t.Fatalf("server %s not reached in process: %+v", h.Name, h)
		}
	}
	res, err := workers.Call(ctx, "classify-intent", map[string]any{"utterance": "hello there"})
	if err != nil || res == nil || len(res.Structured) == 0 {
		t.Fatalf("classify-intent in process: %+v %v", res, err)
	}
}
