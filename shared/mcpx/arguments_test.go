package mcpx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/mcpx"
)

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Tool arguments are a trust boundary (issue 38): arguments that name a member twice — the
// schema validator and the handler would read the last value, a log or a proxy the first —
// are refused before any handler runs, with a tool error that says where; so are arguments
// that are not an object (a bare string), with a sentence instead of "cannot unmarshal". The
// same check holds over Streamable HTTP and stdio, with the official SDK client.
func TestToolArgumentsAreCheckedAtTheBoundary(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := newEchoServer(t, mcpx.RateLimit{}, reg, io.Discard)
	httpSession, err := connect(t, ts.URL, "static-token-world-0001", nil)
	if err != nil {
		t.Fatal(err)
	}
	stdioSession := stdioClient(t, echoOnlyWith(t, reg))
	for name, cs := range map[string]*mcp.ClientSession{"http": httpSession, "stdio": stdioSession} {
		for _, c := range []struct {
			args json.RawMessage
			want string
		}{
			{json.RawMessage(`{"say":"hi","say":"<abuse>"}`), `the arguments of echo at /say: member "say" is named more than once in its object`},
			{json.RawMessage(`{"say":"hi","nested":{"a":1,"a":2}}`), `the arguments of echo at /nested/a: member "a" is named more than once`},
			{json.RawMessage(`"The Sundering"`), `the arguments of echo must be a JSON object naming each argument (as its input schema shows), not a string`},
			{json.RawMessage(`["hi"]`), `not an array`},
		} {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: c.args})
			if err != nil {
				t.Fatalf("%s %s: %v", name, c.args, err)
			}
			if !res.IsError || !strings.Contains(toolText(res), c.want) {
				t.Errorf("%s %s: %q, want a tool error containing %q", name, c.args, toolText(res), c.want)
			}
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"say":"hi"}`)})
		if err != nil || res.IsError {
			t.Fatalf("%s: well-formed arguments: %v %q", name, err, toolText(res))
		}
	}
	if got := testutil.ToFloat64(mustCounter(t, reg, "echo", mcpx.OutcomeInvalidInput)); got != 8 {
		t.Errorf("calls{outcome=invalid_input} = %v, want 8 (4 on each transport)", got)
	}
}

// stdioClient connects the official SDK client to s served by ServeIO over pipes.
func stdioClient(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = mcpx.ServeIO(ctx, s, sr, sw) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); cancel() })
	return cs
}

// CheckArguments adds a tool's hint to a refusal of its arguments' shape.
func TestCheckArgumentsHint(t *testing.T) {
	err := mcpx.CheckArguments("get-canonical-fact", json.RawMessage(`"The Sundering"`), `give {"topic": "The Sundering"}`)
	if err == nil || !strings.HasSuffix(err.Error(), `not a string: give {"topic": "The Sundering"}`) {
		t.Fatalf("%v", err)
	}
	for _, ok := range []string{``, `null`, `{}`, ` {"a": [1, 1], "b": {"a": 1}} `} {
		if err := mcpx.CheckArguments("t", json.RawMessage(ok), ""); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// Rate limits count per client: one client's flood is refused while another client — here
// the same subject from another issuer (the static token file and the static JWT key) — is
// still answered.
func TestRateLimitIsPerClient(t *testing.T) {
	ts := newEchoServer(t, mcpx.RateLimit{PerSecond: 0.001, Burst: 3}, nil, io.Discard)
	flood, err := connect(t, ts.URL, "static-token-world-0001", nil) // subject "static", no issuer
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	limited := 0
	for range 10 {
		res, err := flood.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"say": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError && strings.Contains(toolText(res), "rate limit exceeded") {
			limited++
		}
	}
	if limited != 7 {
		t.Fatalf("%d of 10 flooding calls rate-limited, want 7", limited)
	}
	tok, err := mcpx.IssueJWT(secret, "static", []string{mcpx.ScopeWorldRead}, time.Hour) // subject "static", issuer "worldgate"
	if err != nil {
		t.Fatal(err)
	}
	other, err := connect(t, ts.URL, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"say": "x"}}); err != nil || res.IsError {
		t.Fatalf("another client during the flood: %v %q", err, toolText(res))
	}
}

// FuzzCheckArguments: whatever a client sends as arguments, the check answers (no panic), and
// anything it lets through is one JSON object (or nothing) that names no member twice.
func FuzzCheckArguments(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":1}}`, `"x"`, `[1]`, `1`, `true`, `{"a":null}`, "{\"\xff\":1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) && len(bytes.TrimSpace(data)) > 0 {
			return // the transports answer -32700 before a tool sees it
		}
		if mcpx.CheckArguments("t", data, "") != nil {
			return
		}
		trimmed := bytes.TrimSpace(data)
		if len(trimmed) > 0 && string(trimmed) != "null" && trimmed[0] != '{' {
			t.Fatalf("%q let through: not an object", data)
		}
		if len(trimmed) > 0 && events.CheckJSON("arguments", trimmed) != nil {
			t.Fatalf("%q let through: %v", data, events.CheckJSON("arguments", trimmed))
		}
	})
}
