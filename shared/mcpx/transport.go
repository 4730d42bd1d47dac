package mcpx

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// JSON-RPC 2.0 error codes the transports answer with themselves.
const (
	CodeParseError     = jsonrpc.CodeParseError     // -32700: the input is not JSON
	CodeInvalidRequest = jsonrpc.CodeInvalidRequest // -32600: JSON, but not a JSON-RPC message
	CodeMethodNotFound = jsonrpc.CodeMethodNotFound // -32601: no such method
	CodeForbidden      = -32002                     // the project's range: Origin refused
)

// DefaultAllowedOrigins are the browser origins served when none are
// configured: pages served from the local machine (the MCP Inspector, a local
// editor). A request without an Origin header (every non-browser client) is
// always served; a DNS-rebinding page carries its own origin and is refused.
var DefaultAllowedOrigins = []string{"http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"}

// OriginPolicy decides which browser origins may call an MCP endpoint.
type OriginPolicy struct {
	exact    map[string]bool
	anyPort  []string // "scheme://host" for entries written "scheme://host:*"
	allowAll bool
}

// NewOriginPolicy parses an allow-list. Each entry is an origin
// ("https://editor.example", "http://localhost:6274"), an origin with any port
// ("http://localhost:*"), or "*" (any origin; never do this on a server a
// browser can reach). A nil or empty list means DefaultAllowedOrigins.
func NewOriginPolicy(allowed []string) (*OriginPolicy, error) {
	if len(allowed) == 0 {
		allowed = DefaultAllowedOrigins
	}
	p := &OriginPolicy{exact: map[string]bool{}}
	for _, a := range allowed {
		a = strings.TrimSpace(a)
		switch {
		case a == "":
			continue
		case a == "*":
			p.allowAll = true
		case strings.HasSuffix(a, ":*"):
			base := strings.ToLower(strings.TrimSuffix(a, ":*"))
			if _, err := url.Parse(base); err != nil || !strings.Contains(base, "://") {
				return nil, fmt.Errorf("allowed origin %q: want scheme://host[:port|:*]", a)
			}
			p.anyPort = append(p.anyPort, base)
		default:
			u, err := url.Parse(a)
			if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
				return nil, fmt.Errorf("allowed origin %q: want scheme://host[:port|:*]", a)
			}
			p.exact[strings.ToLower(u.Scheme+"://"+u.Host)] = true
		}
	}
	return p, nil
}

// Allows reports whether a request with this Origin header may be served. An
// empty origin (a client that is not a browser) is allowed.
func (p *OriginPolicy) Allows(origin string) bool {
	if origin == "" || p == nil || p.allowAll {
		return true
	}
	o := strings.ToLower(strings.TrimSuffix(origin, "/"))
	if p.exact[o] {
		return true
	}
	for _, base := range p.anyPort {
		if o == base {
			return true
		}
		if rest, ok := strings.CutPrefix(o, base+":"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return true
		}
	}
	return false
}

// Handler refuses requests from origins not on the list with 403 and a
// JSON-RPC error body (the 2025-11-25 transport specification: servers MUST
// validate Origin to prevent DNS rebinding).
func (p *OriginPolicy) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); !p.Allows(o) {
			WriteJSONRPCError(w, http.StatusForbidden, nil, CodeForbidden, fmt.Sprintf("origin %q is not allowed", o), nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// WriteJSONRPCError writes a JSON-RPC 2.0 error response. id is the request's
// id (a json.RawMessage, number or string) or nil when it could not be read.
func WriteJSONRPCError(w http.ResponseWriter, status int, id any, code int64, msg string, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorResponse(id, code, msg, data))
}

func errorResponse(id any, code int64, msg string, data any) []byte {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
	return b
}

// serverMethods are the client-to-server requests the SDK's server handles
// (go-sdk v1.8.0's serverMethodInfos). A call of any other method is answered
// -32601 by the transports here instead of the SDK's plain-text HTTP 400.
var serverMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "subscriptions/listen": true,
	"prompts/list": true, "prompts/get": true,
	"completion/complete": true, "logging/setLevel": true,
}

// checkMessage classifies one JSON-RPC frame. It returns nil when the SDK
// should handle it, otherwise the error response to send (and whether the
// frame was at least a JSON-RPC request, so the answer is a normal reply).
func checkMessage(frame []byte) (reply []byte, isCall bool) {
	frame = bytes.TrimSpace(frame)
	if !json.Valid(frame) {
		return errorResponse(nil, CodeParseError, "parse error: the message is not valid JSON", nil), false
	}
	if len(frame) > 0 && frame[0] == '[' {
		// A JSON-RPC batch. MCP dropped batching in 2025-06-18, and the SDK's stdio transport
		// ends the whole session at an array it cannot take ([], [1], [{}], or any batch once
		// 2025-06-18 is negotiated); over HTTP it answers plain text. Every Worldgate client
		// sends one message per frame: refuse arrays here, once, for both transports.
		return errorResponse(nil, CodeInvalidRequest, "invalid request: JSON-RPC batches (arrays) are not supported: send each message as one JSON object", nil), false
	}
	var probe struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if err := json.Unmarshal(frame, &probe); err != nil {
		return errorResponse(nil, CodeInvalidRequest, "invalid request: a JSON-RPC message is a JSON object", nil), false
	}
	var id any
	if len(probe.ID) > 0 && string(probe.ID) != "null" {
		id = probe.ID
	}
	msg, err := jsonrpc.DecodeMessage(frame)
	if err != nil {
		return errorResponse(id, CodeInvalidRequest, "invalid request: "+err.Error(), nil), false
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && !serverMethods[req.Method] {
		return errorResponse(id, CodeMethodNotFound, fmt.Sprintf("method not found: %q", req.Method), nil), true
	}
	return nil, false
}

// JSONRPCErrors answers, before the SDK sees them, POST bodies that are not
// JSON (-32700, HTTP 400), are JSON but not a JSON-RPC message or are a batch
// (-32600, HTTP 400), or call a method no MCP server has (-32601, HTTP 200 with the
// request's id): as JSON-RPC error bodies instead of the SDK's plain text.
func JSONRPCErrors(maxBody int64, next http.Handler) http.Handler {
	if maxBody <= 0 {
		maxBody = mcp.DefaultMaxRequestBodyBytes
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				WriteJSONRPCError(w, http.StatusRequestEntityTooLarge, nil, CodeInvalidRequest, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), nil)
				return
			}
			WriteJSONRPCError(w, http.StatusBadRequest, nil, CodeParseError, "reading the request body: "+err.Error(), nil)
			return
		}
		if reply, isCall := checkMessage(body); reply != nil {
			status := http.StatusBadRequest
			if isCall {
				status = http.StatusOK
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(reply)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// lockedWriter serialises whole-message writes of the SDK and of the filter.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

// MaxStdioLine bounds one stdio frame (the SDK's own default).
const MaxStdioLine = mcp.DefaultMaxLineLength

// FilteredStdio returns a transport over in/out that survives any input line:
// a line that is not JSON is answered -32700, one that is not a JSON-RPC
// message or is a batch (a JSON array) -32600, a call of an unknown method -32601, and a line longer than
// MaxStdioLine -32600; the SDK sees only well-formed messages, so one bad
// line no longer ends the session (the SDK's stdio transport stops at the
// first decode error).
func FilteredStdio(in io.Reader, out io.Writer) mcp.Transport {
	lw := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(in, 64*1024)
		var line []byte
		tooLong := false
		for {
			chunk, err := br.ReadSlice('\n')
			if !tooLong {
				line = append(line, chunk...)
				if len(line) > MaxStdioLine {
					tooLong, line = true, line[:0]
				}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if len(bytes.TrimSpace(line)) > 0 || tooLong {
				var reply []byte
				if tooLong {
					reply = errorResponse(nil, CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes", MaxStdioLine), nil)
				} else {
					reply, _ = checkMessage(line)
				}
				if reply != nil {
					_, _ = lw.Write(append(reply, '\n'))
				} else {
					if !bytes.HasSuffix(line, []byte("\n")) {
						line = append(line, '\n')
					}
					if _, werr := pw.Write(line); werr != nil {
						return
					}
				}
			}
			line, tooLong = line[:0], false
			if err != nil {
				_ = pw.CloseWithError(err)
				return
			}
		}
	}()
	return &mcp.IOTransport{Reader: pr, Writer: lw}
}

// serveStdio runs s over t until ctx is done or the peer closes.
func serveStdio(ctx context.Context, s *mcp.Server, t mcp.Transport) error {
	err := s.Run(ctx, t)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
