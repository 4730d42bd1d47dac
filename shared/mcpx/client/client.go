// Package client is the MCP client agents use to reach Worldgate's read-only
// tool servers (mcp-world, mcp-lore, mcp-classify) or any MCP server.
//
//	c, err := client.New(ctx, client.Config{Servers: []client.ServerConfig{
//		{Name: "world", URL: "http://127.0.0.1:7401/mcp", Token: tok},
//		{Name: "classify", Command: "mcp-classify", Args: []string{"-transport", "stdio"}},
//	}, AllowList: []string{"get-location", "list-exits"}})
//	tools := c.Tools(nil)                      // name, description, input schema for the LLM
//	res, err := c.Call(ctx, "get-location", map[string]any{"locationId": "loc:square"})
//	switch client.KindOf(err) { case client.KindUnavailable, client.KindTimeout: /* fall back */ }
//	c.Health()
//	c.Close()
//
// It discovers each server's tools, offers only the allowed ones, refuses a
// call outside the allow-list locally, bounds every call (30 s by default),
// retries once on connect and timeout errors only, and when a server goes
// away marks it unavailable, reconnects in the background and rediscovers its
// tools. The correlation id in the call's context (mcpx.WithCorrelationID) is
// sent as the Worldgate-Correlation-Id header and in _meta.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/worldgate/worldgate/shared/httpx"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// Defaults.
const (
	DefaultCallTimeout    = 30 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultHealthInterval = 10 * time.Second
	// MaxReconnectBackoff bounds the wait between reconnect attempts, so a
	// server that comes back is reconnected well within 30 s.
	MaxReconnectBackoff = 5 * time.Second
)

// ServerConfig names one MCP server: URL (Streamable HTTP) or Command+Args (stdio).
type ServerConfig struct {
	Name    string        `json:"name" yaml:"name"`
	URL     string        `json:"url,omitempty" yaml:"url,omitempty"`
	Command string        `json:"command,omitempty" yaml:"command,omitempty"`
	Args    []string      `json:"args,omitempty" yaml:"args,omitempty"`
	Env     []string      `json:"env,omitempty" yaml:"env,omitempty"`
	Token   string        `json:"token,omitempty" yaml:"token,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"` // per call; default 30 s
	// InProcess is the server itself when it runs in this process (worldgate dev, the
	// harnesses): calls go through the SDK's in-memory transport instead of HTTP, trusted as
	// the process is (no token). It takes precedence over URL and Command.
	InProcess *mcp.Server `json:"-" yaml:"-"`
}

// Config configures a Client.
type Config struct {
	Servers []ServerConfig
	// AllowList, if non-empty, is the role's tool allow-list: other tools are
	// never offered and calls to them are refused locally.
	AllowList []string
	Logger    *slog.Logger
	// HTTPClient is used for URL servers (a default client otherwise). A client without a
	// Transport gets httpx.Transport, which keeps idle connections for reuse.
	HTTPClient *http.Client
	// ConnectTimeout bounds connecting + tool discovery (default 10 s).
	ConnectTimeout time.Duration
	// HealthInterval is how often idle connections are pinged (default 10 s);
	// a failed ping marks the server unavailable.
	HealthInterval time.Duration
	// ReconnectBackoff is the first wait between reconnect attempts (default
	// 250 ms), doubling up to MaxReconnectBackoff.
	ReconnectBackoff time.Duration
}

// Tool is a tool offered to the model.
type Tool struct {
	Server       string          `json:"server"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	ReadOnly     bool            `json:"readOnly"`
}

// Result is a successful tool call.
type Result struct {
	Server string
	Tool   string
	// Structured is the structured content (JSON), if the tool returned any.
	Structured json.RawMessage
	// Text is the concatenated text content (for tools with structured
	// output, the JSON copy of it).
	Text string
}

// Decode unmarshals the structured content into v.
func (r *Result) Decode(v any) error {
	if len(r.Structured) == 0 {
		return errors.New("tool returned no structured content")
	}
	return json.Unmarshal(r.Structured, v)
}

// ServerHealth is one server's state.
type ServerHealth struct {
	Name       string    `json:"name"`
	Available  bool      `json:"available"`
	Since      time.Time `json:"since"`
	LastError  string    `json:"lastError,omitempty"`
	Tools      int       `json:"tools"`
	Reconnects int       `json:"reconnects"`
}

// Client is safe for concurrent use.
type Client struct {
	cfg     Config
	log     *slog.Logger
	allow   map[string]bool // nil: everything
	servers []*server
	ctx     context.Context // client lifetime
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New connects to every configured server. A server that cannot be reached is
// not an error: it is marked unavailable and reconnected in the background.
// New fails only on invalid configuration.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("mcp client: no servers configured")
	}
	seen := map[string]bool{}
	for i, s := range cfg.Servers {
		if s.Name == "" {
			return nil, fmt.Errorf("mcp client: server %d has no name", i)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("mcp client: duplicate server name %q", s.Name)
		}
		seen[s.Name] = true
		if s.InProcess == nil && (s.URL == "") == (s.Command == "") {
			return nil, fmt.Errorf("mcp client: server %q needs exactly one of url or command", s.Name)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = DefaultHealthInterval
	}
	if cfg.ReconnectBackoff <= 0 {
		cfg.ReconnectBackoff = 250 * time.Millisecond
	}
	c := &Client{cfg: cfg, log: cfg.Logger}
	if len(cfg.AllowList) > 0 {
		c.allow = map[string]bool{}
		for _, n := range cfg.AllowList {
			c.allow[n] = true
		}
	}
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, sc := range cfg.Servers {
		if sc.Timeout <= 0 {
			sc.Timeout = DefaultCallTimeout
		}
		c.servers = append(c.servers, &server{c: c, cfg: sc, since: time.Now()})
	}
	var wg sync.WaitGroup
	for _, s := range c.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.connect(ctx); err != nil {
				s.markDown(err)
			}
		}()
	}
	wg.Wait()
	for _, s := range c.servers {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); s.supervise() }()
	}
	return c, nil
}

// Close disconnects from every server and stops background work.
func (c *Client) Close() error {
	c.cancel()
	for _, s := range c.servers {
		s.closeSession()
	}
	c.wg.Wait()
	return nil
}

// Tools returns the tools currently offered by available servers that pass
// both the client's allow-list and allowList (nil: no further filter),
// sorted by name. A name offered by two servers goes to the first configured.
func (c *Client) Tools(allowList []string) []Tool {
	var out []Tool
	seen := map[string]bool{}
	for _, s := range c.servers {
		s.mu.Lock()
		if s.available {
			for _, t := range s.tools {
				if seen[t.Name] || !c.allowed(t.Name) || (allowList != nil && !slices.Contains(allowList, t.Name)) {
					continue
				}
				seen[t.Name] = true
				out = append(out, t)
			}
		}
		s.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *Client) allowed(tool string) bool { return c.allow == nil || c.allow[tool] }

// Health reports every server's state, in configuration order.
func (c *Client) Health() []ServerHealth {
	out := make([]ServerHealth, 0, len(c.servers))
	for _, s := range c.servers {
		s.mu.Lock()
		h := ServerHealth{Name: s.cfg.Name, Available: s.available, Since: s.since, Tools: len(s.tools), Reconnects: s.reconnects}
		if s.lastErr != nil {
			h.LastError = s.lastErr.Error()
		}
		s.mu.Unlock()
		out = append(out, h)
	}
	return out
}

// Role returns a view of the client restricted to allowList (intersected with
// the client's own allow-list).
func (c *Client) Role(allowList []string) *Role {
	return &Role{c: c, allow: slices.Clone(allowList)}
}

// Role is a client view limited to one agent role's allow-list.
type Role struct {
	c     *Client
	allow []string
}

// Tools lists the role's tools.
func (r *Role) Tools() []Tool { return r.c.Tools(r.allow) }

// Call calls a tool of the role; others are refused with KindNotAllowed.
func (r *Role) Call(ctx context.Context, tool string, args any) (*Result, error) {
	if !slices.Contains(r.allow, tool) {
		return nil, &Error{Kind: KindNotAllowed, Tool: tool, Message: "tool is not in this role's allow-list"}
	}
	return r.c.Call(ctx, tool, args)
}

// serverFor finds the server that offers tool (or offered it before it went down).
func (c *Client) serverFor(tool string) *server {
	var fallback *server
	for _, s := range c.servers {
		s.mu.Lock()
		_, has := s.known[tool]
		avail := s.available
		s.mu.Unlock()
		if has && avail {
			return s
		}
		if has && fallback == nil {
			fallback = s
		}
	}
	return fallback
}

// Call calls tool with args (any value that marshals to a JSON object).
// Errors are *Error values; see Kind.
func (c *Client) Call(ctx context.Context, tool string, args any) (*Result, error) {
	if c.ctx.Err() != nil {
		return nil, &Error{Kind: KindClosed, Tool: tool}
	}
	if !c.allowed(tool) {
		return nil, &Error{Kind: KindNotAllowed, Tool: tool, Message: "tool is not in the allow-list"}
	}
	s := c.serverFor(tool)
	if s == nil {
		return nil, &Error{Kind: KindUnavailable, Tool: tool, Message: "no connected server offers this tool"}
	}
	if args == nil {
		args = map[string]any{}
	}
	cid := mcpx.CorrelationID(ctx)
	if cid == "" {
		cid = mcpx.NewCorrelationID()
		ctx = mcpx.WithCorrelationID(ctx, cid)
	}
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		res, err, retry := s.call(ctx, tool, args, cid)
		if err == nil {
			return res, nil
		}
		lastErr = err
		if !retry || ctx.Err() != nil {
			break
		}
		c.log.Warn("mcp.client.retry", "server", s.cfg.Name, "tool", tool, "correlationId", cid, "error", err.Error())
	}
	return nil, lastErr
}

type server struct {
	c   *Client
	cfg ServerConfig

	mu         sync.Mutex
	session    *mcp.ClientSession
	available  bool
	tools      []Tool          // allowed-or-not; filtered at Tools()
	known      map[string]bool // every tool ever discovered (routing while down)
	since      time.Time       // of the current state
	lastErr    error           // last connect / transport error
	reconnects int             // successful reconnections
	kick       chan struct{}   // wakes the supervisor
	connecting sync.Mutex      // one connect at a time
	gen        int             // session generation
}

func (s *server) transport() (mcp.Transport, error) {
	if s.cfg.InProcess != nil {
		// The server runs in this process: an in-memory pipe, no HTTP, no JSON over a socket
		// (the SDK still encodes each message once).
		ct, st := mcp.NewInMemoryTransports()
		if _, err := s.cfg.InProcess.Connect(s.c.ctx, st, nil); err != nil {
			return nil, fmt.Errorf("connect in process: %w", err)
		}
		return ct, nil
	}
	if s.cfg.URL != "" {
		hc := *s.c.cfg.HTTPClient
		base := hc.Transport
		if base == nil {
			base = httpx.Transport
		}
		hc.Transport = &headerRoundTripper{base: base, token: s.cfg.Token}
		return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: &hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	if len(s.cfg.Env) > 0 {
		cmd.Env = append(cmd.Environ(), s.cfg.Env...)
	}
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
}

// connect establishes a session and discovers tools. Concurrent callers share
// one attempt: a caller that waited for another's successful attempt returns nil.
func (s *server) connect(ctx context.Context) error {
	s.mu.Lock()
	gen := s.gen
	s.mu.Unlock()
	s.connecting.Lock()
	defer s.connecting.Unlock()
	s.mu.Lock()
	if s.gen != gen && s.available {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if s.c.ctx.Err() != nil {
		return ErrClosed
	}

	ctx, cancel := context.WithTimeout(ctx, s.c.cfg.ConnectTimeout)
	defer cancel()
	t, err := s.transport()
	if err != nil {
		return err
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "worldgate-agent", Version: "1"}, nil)
	sess, err := cl.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	var tools []Tool
	known := map[string]bool{}
	for tl, err := range sess.Tools(ctx, nil) {
		if err != nil {
			_ = sess.Close()
			return fmt.Errorf("list tools: %w", err)
		}
		in, _ := json.Marshal(tl.InputSchema)
		var outSchema json.RawMessage
		if tl.OutputSchema != nil {
			outSchema, _ = json.Marshal(tl.OutputSchema)
		}
		tools = append(tools, Tool{
			Server: s.cfg.Name, Name: tl.Name, Description: tl.Description,
			InputSchema: in, OutputSchema: outSchema,
			ReadOnly: tl.Annotations != nil && tl.Annotations.ReadOnlyHint,
		})
		known[tl.Name] = true
	}
	s.mu.Lock()
	if s.session != nil {
		_ = s.session.Close()
	}
	wasDown := !s.available && s.lastErr != nil
	s.session = sess
	s.tools = tools
	if s.known == nil {
		s.known = map[string]bool{}
	}
	for k := range known {
		s.known[k] = true
	}
	s.available = true
	s.since = time.Now()
	s.lastErr = nil
	s.gen++
	myGen := s.gen
	if wasDown {
		s.reconnects++
	}
	s.mu.Unlock()
	s.c.log.Info("mcp.server.connected", "server", s.cfg.Name, "tools", len(tools), "reconnect", wasDown)
	// Watch the session: when it ends (process exited, transport failed),
	// mark the server down so the supervisor reconnects.
	s.c.wg.Add(1)
	go func() {
		defer s.c.wg.Done()
		_ = sess.Wait()
		s.markDownGen(myGen, errors.New("session ended"))
	}()
	return nil
}

func (s *server) markDown(err error) { s.markDownGen(-1, err) }

// markDownGen marks the server unavailable if the session generation still
// matches (gen -1 matches any) and wakes the supervisor.
func (s *server) markDownGen(gen int, err error) {
	s.mu.Lock()
	if gen >= 0 && gen != s.gen {
		s.mu.Unlock()
		return
	}
	if s.available || s.lastErr == nil {
		s.since = time.Now()
	}
	was := s.available
	s.available = false
	s.lastErr = err
	sess := s.session
	s.session = nil
	s.gen++
	kick := s.kickChan()
	s.mu.Unlock()
	if sess != nil {
		go func() { _ = sess.Close() }()
	}
	if was && s.c.ctx.Err() == nil {
		s.c.log.Warn("mcp.server.unavailable", "server", s.cfg.Name, "error", err.Error())
	}
	select {
	case kick <- struct{}{}:
	default:
	}
}

func (s *server) kickChan() chan struct{} {
	if s.kick == nil {
		s.kick = make(chan struct{}, 1)
	}
	return s.kick
}

func (s *server) closeSession() {
	s.mu.Lock()
	sess := s.session
	s.session = nil
	s.available = false
	s.gen++
	s.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
}

// supervise pings the server while it is up and reconnects (with capped
// backoff) while it is down, until the client closes.
func (s *server) supervise() {
	s.mu.Lock()
	kick := s.kickChan()
	s.mu.Unlock()
	backoff := s.c.cfg.ReconnectBackoff
	for {
		s.mu.Lock()
		up, sess := s.available, s.session
		s.mu.Unlock()
		var wait time.Duration
		if up {
			wait = s.c.cfg.HealthInterval
			backoff = s.c.cfg.ReconnectBackoff
		} else {
			wait = backoff
			backoff = min(backoff*2, MaxReconnectBackoff)
		}
		timer := time.NewTimer(wait)
		select {
		case <-s.c.ctx.Done():
			timer.Stop()
			return
		case <-kick:
			timer.Stop()
			continue // state changed: re-evaluate (a fresh outage retries after the first backoff)
		case <-timer.C:
		}
		if up {
			ctx, cancel := context.WithTimeout(s.c.ctx, 5*time.Second)
			err := sess.Ping(ctx, nil)
			cancel()
			if err != nil && s.c.ctx.Err() == nil {
				s.markDown(fmt.Errorf("ping: %w", err))
			}
			continue
		}
		if err := s.connect(s.c.ctx); err != nil {
			s.mu.Lock()
			s.lastErr = err
			s.mu.Unlock()
			s.c.log.Debug("mcp.server.reconnect_failed", "server", s.cfg.Name, "error", err.Error())
		}
	}
}

// call makes one attempt. retry reports whether a second attempt is allowed
// (connect and timeout errors only).
func (s *server) call(ctx context.Context, tool string, args any, cid string) (*Result, error, bool) {
	s.mu.Lock()
	sess, up := s.session, s.available
	s.mu.Unlock()
	if !up || sess == nil {
		// One synchronous connect attempt (the background loop keeps trying too).
		if err := s.connect(ctx); err != nil {
			s.mu.Lock()
			s.lastErr = err
			s.mu.Unlock()
			return nil, &Error{Kind: KindUnavailable, Server: s.cfg.Name, Tool: tool, Err: err}, true
		}
		s.mu.Lock()
		sess = s.session
		s.mu.Unlock()
		if sess == nil {
			return nil, &Error{Kind: KindUnavailable, Server: s.cfg.Name, Tool: tool, Message: "not connected"}, true
		}
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	res, err := sess.CallTool(cctx, &mcp.CallToolParams{
		Meta:      mcp.Meta{mcpx.CorrelationMetaKey: cid},
		Name:      tool,
		Arguments: args,
	})
	if err != nil {
		var we *jsonrpc.Error
		switch {
		case ctx.Err() != nil:
			return nil, &Error{Kind: KindTimeout, Server: s.cfg.Name, Tool: tool, Err: ctx.Err()}, false
		case cctx.Err() != nil:
			return nil, &Error{Kind: KindTimeout, Server: s.cfg.Name, Tool: tool, Message: fmt.Sprintf("no answer within %s", s.cfg.Timeout)}, true
		case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, mcp.ErrSessionMissing):
			s.markDown(err)
			return nil, &Error{Kind: KindUnavailable, Server: s.cfg.Name, Tool: tool, Err: err}, true
		case isAuthRefusal(err):
			s.markDown(err)
			return nil, &Error{Kind: KindUnavailable, Server: s.cfg.Name, Tool: tool, Message: "server refused our credentials", Err: err}, false
		case errors.Is(err, errRejected):
			// The transport could not deliver the request (connection
			// refused or reset, 5xx, 429).
			s.markDown(err)
			return nil, &Error{Kind: KindUnavailable, Server: s.cfg.Name, Tool: tool, Err: err}, true
		case errors.As(err, &we):
			// The server answered with a protocol error (unknown tool, bad params).
			return nil, &Error{Kind: KindToolError, Server: s.cfg.Name, Tool: tool, Message: we.Message, Err: err}, false
		default:
			// Transport failure: connection refused, reset, EOF.
			s.markDown(err)
			return nil, &Error{Kind: KindUnavailable, Server: s.cfg.Name, Tool: tool, Err: err}, true
		}
	}
	text := resultText(res)
	if res.IsError {
		e := &Error{Kind: KindToolError, Server: s.cfg.Name, Tool: tool, Message: text}
		if ms, ok := res.Meta[mcpx.RetryAfterMetaKey].(float64); ok {
			e.RetryAfter = time.Duration(ms) * time.Millisecond
		}
		return nil, e, false
	}
	out := &Result{Server: s.cfg.Name, Tool: tool, Text: text}
	if res.StructuredContent != nil {
		out.Structured, _ = json.Marshal(res.StructuredContent)
	}
	return out, nil, false
}

// errRejected matches the SDK's "rejected by transport" error (code -32005).
var errRejected = &jsonrpc.Error{Code: -32005}

func isAuthRefusal(err error) bool {
	m := err.Error()
	return strings.Contains(m, http.StatusText(http.StatusUnauthorized)) || strings.Contains(m, http.StatusText(http.StatusForbidden))
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// headerRoundTripper adds the bearer token and the correlation id header.
type headerRoundTripper struct {
	base  http.RoundTripper
	token string
}

func (h *headerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.token != "" {
		r.Header.Set("Authorization", "Bearer "+h.token)
	}
	if cid := mcpx.CorrelationID(r.Context()); cid != "" {
		r.Header.Set(mcpx.CorrelationHeader, cid)
	}
	// No call needs a stream: plain JSON answers spare the server its SSE framing and
	// resumption store (a server that does not know the header streams, which works too).
	r.Header.Set(mcpx.ResponseHeader, mcpx.ResponseJSON)
	return h.base.RoundTrip(r)
}
