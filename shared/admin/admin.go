// Package admin serves a worker's operational endpoints on its admin port: /metrics
// (Prometheus), /healthz (the process is alive) and /readyz (it can do its work now: every
// readiness check passes). It knows nothing of what the worker does.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether a dependency is usable; a nil error means ready.
type Check func(ctx context.Context) error

// Detail describes a dependency's state for an operator (e.g. each LLM target's circuit)
// without deciding readiness; /readyz shows it under "detail".
type Detail func(ctx context.Context) any

// Server is an admin HTTP server.
type Server struct {
	mu     sync.RWMutex
	checks map[string]Check
	detail map[string]Detail
	mux    *http.ServeMux
	srv    *http.Server
	ln     net.Listener
	log    *slog.Logger
}

// New returns an admin server exposing gatherer's metrics.
func New(gatherer prometheus.Gatherer, log *slog.Logger) *Server {
	s := &Server{checks: map[string]Check{}, detail: map[string]Detail{}, mux: http.NewServeMux(), log: log}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.ready)
	return s
}

// AddCheck adds a named readiness check.
func (s *Server) AddCheck(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = c
}

// AddDetail adds a named detail to /readyz's answer. It never makes the server unready:
// a worker that degrades gracefully (an LLM target whose circuit is open fails over) stays
// ready, and the detail tells the operator why it is degraded.
func (s *Server) AddDetail(name string, d Detail) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detail[name] = d
}

// ServeProfiles serves Go's runtime profiles under /debug/pprof/ (net/http/pprof): what `go tool
// pprof http://ADMIN/debug/pprof/profile?seconds=10` reads. Off unless a worker is started with
// -pprof: a profile shows the program's internals, and a CPU profile costs a few per cent while
// it runs.
func (s *Server) ServeProfiles() {
	s.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	s.mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// Handle adds another handler to the admin mux (e.g. a debug page).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Handler is the admin mux, for embedding into another server or an httptest server.
func (s *Server) Handler() http.Handler { return s.mux }

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	s.mu.RLock()
	names := make([]string, 0, len(s.checks))
	for n := range s.checks {
		names = append(names, n)
	}
	s.mu.RUnlock()
	sort.Strings(names)
	failed := map[string]string{}
	for _, n := range names {
		s.mu.RLock()
		c := s.checks[n]
		s.mu.RUnlock()
		if err := c(ctx); err != nil {
			failed[n] = err.Error()
		}
	}
	s.mu.RLock()
	details := make(map[string]Detail, len(s.detail))
	for n, d := range s.detail {
		details[n] = d
	}
	s.mu.RUnlock()
	var detail map[string]any
	if len(details) > 0 {
		detail = map[string]any{}
		for n, d := range details {
			detail[n] = d(ctx)
		}
	}
	if len(failed) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "failing": failed, "detail": detail})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": names, "detail": detail})
}

// Start listens on addr ("127.0.0.1:0" picks a port) and serves in the background.
func (s *Server) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server stopped", "err", err)
		}
	}()
	return nil
}

// Addr is the address the server listens on, once started.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close shuts the server down gracefully.
func (s *Server) Close(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Shutdown(ctx)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
