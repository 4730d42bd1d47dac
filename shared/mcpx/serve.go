package mcpx

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTPOptions configure HTTPHandler.
type HTTPOptions struct {
	// Auth authenticates callers; Scope is the scope every request must hold.
	Auth  AuthConfig
	Scope string
	// SessionTimeout closes idle sessions (default 10 minutes).
	SessionTimeout time.Duration
	Logger         *slog.Logger
	// Origins are the browser origins allowed to call (nil:
	// DefaultAllowedOrigins); any other Origin is refused with 403.
	Origins *OriginPolicy
}

// EventStoreBytes bounds the SSE events an HTTP server keeps for resumption (the oldest are
// dropped first).
const EventStoreBytes = 4 << 20

// ResponseHeader, set to ResponseJSON on every request of a session (initialize included),
// asks an HTTPHandler for plain JSON responses: each POST is answered with one
// application/json body instead of an SSE stream with a priming event kept for resumption.
// Worldgate's own client (shared/mcpx/client) asks for it: it needs no stream (no progress,
// no server requests during a call; a lost answer is a failed call it retries). Every other
// client gets the resumable SSE streams the transport specifies.
const (
	ResponseHeader = "Worldgate-Mcp-Response"
	ResponseJSON   = "json"
)

// HTTPHandler serves s over Streamable HTTP behind bearer authentication.
func HTTPHandler(s *mcp.Server, o HTTPOptions) http.Handler {
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 10 * time.Minute
	}
	// Resumable SSE streams (2025-11-25 transport, SEP-1699): each POST stream starts with a
	// priming event carrying an event id, and a client that lost the stream resumes it with
	// Last-Event-ID from the events kept in memory (at most EventStoreBytes per server).
	events := mcp.NewMemoryEventStore(nil)
	events.SetMaxBytes(EventStoreBytes)
	get := func(*http.Request) *mcp.Server { return s }
	streams := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		SessionTimeout: o.SessionTimeout,
		Logger:         o.Logger,
		EventStore:     events,
	})
	// The same server with plain JSON answers (ResponseHeader): its sessions are its own, and
	// a client asks for it on every request of its session.
	plain := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		SessionTimeout: o.SessionTimeout,
		Logger:         o.Logger,
		JSONResponse:   true,
	})
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(ResponseHeader) == ResponseJSON {
			plain.ServeHTTP(w, r)
			return
		}
		streams.ServeHTTP(w, r)
	})
	// Outermost first: Origin (403), then the bearer token (401/403), then
	// malformed JSON and unknown methods (JSON-RPC errors), then the SDK,
	// which also refuses a non-loopback Host on a loopback listener.
	h = JSONRPCErrors(mcp.DefaultMaxRequestBodyBytes, h)
	if o.Auth.Enabled() {
		h = RequireScope(o.Auth, o.Scope, h)
	}
	origins := o.Origins
	if origins == nil {
		origins, _ = NewOriginPolicy(nil)
	}
	return origins.Handler(h)
}

// ServeStdio serves s on the process's stdin/stdout until ctx is done or the
// peer closes. stdio is for trusted local use: there is no token.
func ServeStdio(ctx context.Context, s *mcp.Server) error {
	return serveStdio(ctx, s, FilteredStdio(os.Stdin, os.Stdout))
}

// ServeIO is ServeStdio over any reader and writer (tests, pipes).
func ServeIO(ctx context.Context, s *mcp.Server, in io.Reader, out io.Writer) error {
	return serveStdio(ctx, s, FilteredStdio(in, out))
}

// Readiness is a named readiness check for /readyz.
type Readiness func(ctx context.Context) error

// AdminMux returns a mux with /metrics (from gatherer), /healthz (always ok
// while the process serves) and /readyz (ok when ready returns nil).
func AdminMux(gatherer prometheus.Gatherer, ready Readiness) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
			defer cancel()
			if err := ready(ctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("not ready: " + err.Error() + "\n"))
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// ServeHTTP serves h on addr until ctx is done, then shuts down gracefully
// (in-flight requests get up to grace to finish). If ln is non-nil it is used
// instead of listening on addr. started, if non-nil, receives the bound address.
func ServeHTTP(ctx context.Context, addr string, h http.Handler, grace time.Duration, started func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if started != nil {
		started(ln.Addr())
	}
	// Long-lived SSE streams never end on their own: their contexts derive
	// from base, which is cancelled shortly after shutdown starts so that
	// in-flight tool calls can still finish.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return base }}
	var shutdownErr atomic.Value
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		t := time.AfterFunc(min(grace/2, 500*time.Millisecond), cancelBase)
		defer t.Stop()
		if err := srv.Shutdown(sctx); err != nil {
			shutdownErr.Store(err)
			_ = srv.Close()
		}
	}()
	err = srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		if e, ok := shutdownErr.Load().(error); ok {
			return e
		}
		return nil
	}
	return err
}
