// Package graphx is Worldgate's one Gremlin connection helper, for the graph's writer (the
// event-processor) and its readers alike: connection settings with flags, a lazily dialled
// gremlin-go v3.7.6 connection that redials after a transport failure, per-request deadlines,
// error classification (transport vs server), a health check for /readyz, and a GraphBinary
// reader for JanusGraph's custom edge-id type.
//
// Production servers run TinkerPop 3.7 (JanusGraph 1.x, Amazon Neptune ≥ 1.3); the embedded
// default is graphd. Azure Cosmos DB's Gremlin API accepts only GraphSON 2 *scripts*, not
// bytecode over GraphBinary, so gremlin-go — and therefore Worldgate — cannot talk to it.
//
// graphx knows nothing of the world model; it must not build domain traversals.
package graphx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

// Settings say how to reach the graph. The zero value (plus a URL) works.
type Settings struct {
	URL      string // ws://host:8182/gremlin or wss://…
	Username string
	Password string
	// CAFile is a PEM bundle of certificate authorities for wss:// (empty: the system pool).
	CAFile string
	// InsecureSkipVerify disables TLS certificate checks (development only).
	InsecureSkipVerify bool
	// ConnectionTimeout bounds the WebSocket dial and authentication. Default 5s.
	ConnectionTimeout time.Duration
	// KeepAlive is the WebSocket ping interval that detects a dead server. Default 5s.
	KeepAlive time.Duration
	// PoolSize bounds the WebSocket connections in the pool. Default 4.
	PoolSize int
	// ReadTimeout bounds the wait for one request's complete response. Default 15s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one request to the socket. Default 5s.
	WriteTimeout time.Duration
	// ReadOnly adds ReadOnlyStrategy to every traversal source (readers should also use
	// read-only credentials: the strategy is a second line, not the guard).
	ReadOnly bool
}

func (s Settings) withDefaults() Settings {
	if s.ConnectionTimeout <= 0 {
		s.ConnectionTimeout = 5 * time.Second
	}
	if s.KeepAlive <= 0 {
		s.KeepAlive = 5 * time.Second
	}
	if s.PoolSize <= 0 {
		s.PoolSize = 4
	}
	if s.ReadTimeout <= 0 {
		s.ReadTimeout = 15 * time.Second
	}
	if s.WriteTimeout <= 0 {
		s.WriteTimeout = 5 * time.Second
	}
	return s
}

// RegisterFlags adds the settings to fs as -<prefix>url, -<prefix>username, … (prefix e.g.
// "graph-"), with the current values of s as defaults. With config.Parse every flag also has
// a WORLDGATE_* environment variable (WORLDGATE_GRAPH_PASSWORD …).
func (s *Settings) RegisterFlags(fs *flag.FlagSet, prefix string) {
	fs.StringVar(&s.URL, prefix+"url", s.URL, "Gremlin server WebSocket URL (ws://host:8182/gremlin, wss:// for TLS)")
	fs.StringVar(&s.Username, prefix+"user", s.Username, "graph user")
	// The event-processor spelt it -graph-username: still accepted, with a warning.
	fs.Var(deprecated{to: &s.Username, name: prefix + "username", use: prefix + "user"}, prefix+"username", "deprecated: use -"+prefix+"user")
	fs.StringVar(&s.Password, prefix+"password", s.Password, "graph password (prefer the environment variable)")
	fs.StringVar(&s.CAFile, prefix+"ca-file", s.CAFile, "PEM file of CAs trusted for wss:// (default: system pool)")
	fs.BoolVar(&s.InsecureSkipVerify, prefix+"insecure-skip-verify", s.InsecureSkipVerify, "skip TLS certificate verification (development only)")
	fs.DurationVar(&s.ConnectionTimeout, prefix+"connect-timeout", s.withDefaults().ConnectionTimeout, "dial and authentication timeout")
	fs.DurationVar(&s.KeepAlive, prefix+"keep-alive", s.withDefaults().KeepAlive, "WebSocket ping interval")
	fs.IntVar(&s.PoolSize, prefix+"pool-size", s.withDefaults().PoolSize, "maximum WebSocket connections")
	fs.DurationVar(&s.ReadTimeout, prefix+"read-timeout", s.withDefaults().ReadTimeout, "time limit for one request's response")
	fs.DurationVar(&s.WriteTimeout, prefix+"write-timeout", s.withDefaults().WriteTimeout, "time limit for writing one request")
}

// deprecated is an old flag name that still sets its setting, warning that it is deprecated.
type deprecated struct {
	to        *string
	name, use string
}

func (d deprecated) String() string { return "" }

func (d deprecated) Set(v string) error {
	slog.Warn("deprecated flag or environment variable: use the new name", "flag", "-"+d.name, "use", "-"+d.use)
	*d.to = v
	return nil
}

// ErrNotConfigured is returned when Settings.URL is empty.
var ErrNotConfigured = errors.New("graph URL not configured: set -graph-url (or its WORLDGATE_* environment variable)")

// Conn is a lazily dialled connection. After a transport failure it drops the pool and the
// next request dials again, so a restarted server is picked up without a restart here. Safe
// for concurrent use.
type Conn struct {
	s   Settings
	tls *tls.Config

	mu  sync.Mutex
	drc *gremlingo.DriverRemoteConnection
}

// Open validates s and returns a Conn; nothing is dialled until the first request (use Ping
// to fail fast).
func Open(s Settings) (*Conn, error) {
	RegisterJanusGraphTypes()
	s = s.withDefaults()
	if s.URL == "" {
		return nil, ErrNotConfigured
	}
	c := &Conn{s: s}
	if strings.HasPrefix(s.URL, "wss://") || s.CAFile != "" || s.InsecureSkipVerify {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.InsecureSkipVerify} //nolint:gosec // opt-in for development
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return nil, fmt.Errorf("read graph CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("graph CA file %s holds no PEM certificate", s.CAFile)
			}
			cfg.RootCAs = pool
		}
		c.tls = cfg
	}
	return c, nil
}

// Settings returns the effective settings (defaults applied).
func (c *Conn) Settings() Settings { return c.s }

func (c *Conn) remote() (*gremlingo.DriverRemoteConnection, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drc != nil {
		return c.drc, nil
	}
	drc, err := gremlingo.NewDriverRemoteConnection(c.s.URL, func(o *gremlingo.DriverRemoteConnectionSettings) {
		if c.s.Username != "" {
			o.AuthInfo = gremlingo.BasicAuthInfo(c.s.Username, c.s.Password)
		}
		o.TlsConfig = c.tls
		o.ConnectionTimeout = c.s.ConnectionTimeout
		o.KeepAliveInterval = c.s.KeepAlive
		o.WriteDeadline = c.s.WriteTimeout
		o.MaximumConcurrentConnections = c.s.PoolSize
		o.LogVerbosity = gremlingo.Off
	})
	if err != nil {
		return nil, &TransportError{Err: fmt.Errorf("connect to graph %s: %w", c.s.URL, err)}
	}
	c.drc = drc
	return drc, nil
}

// G returns a traversal source on the connection (with ReadOnlyStrategy when configured).
func (c *Conn) G() (*gremlingo.GraphTraversalSource, error) {
	drc, err := c.remote()
	if err != nil {
		return nil, err
	}
	g := gremlingo.Traversal_().WithRemote(drc)
	if c.s.ReadOnly {
		g = g.WithStrategies(gremlingo.ReadOnlyStrategy())
	}
	return g, nil
}

// Reset drops the pool; the next request dials again.
func (c *Conn) Reset() {
	c.mu.Lock()
	drc := c.drc
	c.drc = nil
	c.mu.Unlock()
	if drc != nil {
		go closeDriver(drc)
	}
}

// closeDriver closes a gremlin-go connection whose transport may already be closed: the driver
// closes it when its read loop fails, and closing it again panics ("close of closed channel").
func closeDriver(drc *gremlingo.DriverRemoteConnection) {
	defer func() { _ = recover() }()
	drc.Close()
}

// Close closes the connection.
func (c *Conn) Close() {
	c.mu.Lock()
	drc := c.drc
	c.drc = nil
	c.mu.Unlock()
	if drc != nil {
		closeDriver(drc)
	}
}

// Submit runs the traversal build(g) as one request (one transaction on a sessionless server)
// and returns its results as plain Go values. It waits at most ReadTimeout, or until ctx ends:
// gremlin-go has no per-request context, so a request that times out may still complete on the
// server — callers must make their traversals idempotent. A transport failure resets the pool
// and is returned as a *TransportError; an error response from the server as a *ServerError.
func (c *Conn) Submit(ctx context.Context, build func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal) ([]any, error) {
	g, err := c.G()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.s.ReadTimeout)
	defer cancel()
	type result struct {
		out []any
		err error
	}
	ch := make(chan result, 1)
	go func() {
		defer func() {
			// gremlin-go panics when a request is written while the connection it shares with
			// other requests is being closed (a send on the transporter's closed channel;
			// seen as the gate process dying when graphd was killed under load). That is a
			// broken connection, not a reason to end the process.
			if r := recover(); r != nil {
				ch <- result{err: fmt.Errorf("the graph driver failed on a closing connection: %v", r)}
			}
		}()
		rs, err := build(g).ToList()
		if err != nil {
			ch <- result{err: err}
			return
		}
		out := make([]any, 0, len(rs))
		for _, r := range rs {
			out = append(out, r.GetInterface())
		}
		ch <- result{out: out}
	}()
	select {
	case <-ctx.Done():
		c.Reset()
		return nil, &TransportError{Err: fmt.Errorf("graph request: %w", ctx.Err())}
	case r := <-ch:
		if r.err == nil {
			return r.out, nil
		}
		if isServerError(r.err) && !isShuttingDown(r.err) {
			return nil, &ServerError{Err: r.err}
		}
		c.Reset()
		return nil, &TransportError{Err: r.err}
	}
}

// Ping checks that the graph answers a trivial read (a readiness check for /readyz).
func (c *Conn) Ping(ctx context.Context) error {
	_, err := c.Submit(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.Inject(1)
	})
	return err
}

// TransportError means the request may not have reached the server, or its answer was lost:
// the graph is unreachable, the connection broke, or the response timed out. Retry later.
type TransportError struct{ Err error }

func (e *TransportError) Error() string { return "graph unavailable: " + e.Err.Error() }
func (e *TransportError) Unwrap() error { return e.Err }

// ServerError is an error response from the server: the traversal was refused or failed (and,
// on a transactional server, rolled back).
type ServerError struct{ Err error }

func (e *ServerError) Error() string { return "graph refused the request: " + e.Err.Error() }
func (e *ServerError) Unwrap() error { return e.Err }

// IsTransport reports whether err is a *TransportError.
func IsTransport(err error) bool {
	var t *TransportError
	return errors.As(err, &t)
}

// IsServer reports whether err is a *ServerError.
func IsServer(err error) bool {
	var s *ServerError
	return errors.As(err, &s)
}

// isServerError recognises gremlin-go's wrapping of an error status from the server (E0502)
// and of an authentication failure (E0503).
// isShuttingDown reports a server's refusal to start a request because it is stopping (graphd
// answers "graphd is shutting down"): the request did not run, and another server, or this one
// restarted, will take it — a transport failure, not a refusal of the traversal.
func isShuttingDown(err error) bool { return strings.Contains(err.Error(), "is shutting down") }

func isServerError(err error) bool {
	m := err.Error()
	return strings.Contains(m, "E0502") || strings.Contains(m, "E0503")
}
