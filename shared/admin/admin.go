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
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether a dependency is usable; a nil error means ready.
type Check func(ctx context.Context) error

// Server is an admin HTTP server.
type Server struct {
	mu     sync.RWMutex
	checks map[string]Check
	mux    *http.ServeMux
	srv    *http.Server
	ln     net.Listener
	log    *slog.Logger
}

// New returns an admin server exposing gatherer's metrics.
func New(gatherer prometheus.Gatherer, log *slog.Logger) *Server {
	s := &Server{checks: map[string]Check{}, mux: http.NewServeMux(), log: log}
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
	if len(failed) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "failing": failed})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": names})
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
