// Package gremlinro is a read-only Gremlin connection for MCP tool servers:
// it connects lazily with the graph's read-only user, reconnects after a
// failure, and hands out traversal sources that always carry ReadOnlyStrategy
// (so a write is refused by the server even if the credentials allowed it).
//
// Azure Cosmos DB's Gremlin API only accepts GraphSON 2 scripts, so
// gremlin-go (bytecode over GraphBinary) cannot talk to it.
package gremlinro

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

// Config names the graph and the read-only credentials.
type Config struct {
	URL      string // ws://host:8182/gremlin
	Username string
	Password string
	// ConnectionTimeout bounds the WebSocket dial (default 5 s).
	ConnectionTimeout time.Duration
	// MaxConnections bounds the pool (default 4).
	MaxConnections int
}

// Conn is a lazily established read-only connection. Safe for concurrent use.
type Conn struct {
	cfg Config

	mu   sync.Mutex
	drc  *gremlingo.DriverRemoteConnection
	last error
}

// New returns a Conn; nothing is dialled until first use.
func New(cfg Config) *Conn {
	if cfg.ConnectionTimeout <= 0 {
		cfg.ConnectionTimeout = 5 * time.Second
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 4
	}
	return &Conn{cfg: cfg}
}

// ErrNotConfigured is returned when no URL was given.
var ErrNotConfigured = errors.New("graph URL not configured")

// G returns a traversal source with ReadOnlyStrategy, dialling if needed.
func (c *Conn) G() (*gremlingo.GraphTraversalSource, error) {
	drc, err := c.remote()
	if err != nil {
		return nil, err
	}
	return gremlingo.Traversal_().WithRemote(drc).WithStrategies(gremlingo.ReadOnlyStrategy()), nil
}

// Remote returns the underlying connection (tests use it to prove that
// writes through it are refused).
func (c *Conn) Remote() (*gremlingo.DriverRemoteConnection, error) { return c.remote() }

func (c *Conn) remote() (*gremlingo.DriverRemoteConnection, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drc != nil {
		return c.drc, nil
	}
	if c.cfg.URL == "" {
		return nil, ErrNotConfigured
	}
	drc, err := gremlingo.NewDriverRemoteConnection(c.cfg.URL, func(s *gremlingo.DriverRemoteConnectionSettings) {
		if c.cfg.Username != "" {
			s.AuthInfo = gremlingo.BasicAuthInfo(c.cfg.Username, c.cfg.Password)
		}
		s.ConnectionTimeout = c.cfg.ConnectionTimeout
		s.MaximumConcurrentConnections = c.cfg.MaxConnections
		s.LogVerbosity = gremlingo.Error
	})
	if err != nil {
		c.last = err
		return nil, fmt.Errorf("connecting to graph %s: %w", c.cfg.URL, err)
	}
	c.drc = drc
	return drc, nil
}

// Reset drops the connection after a transport failure; the next G dials again.
func (c *Conn) Reset() {
	c.mu.Lock()
	drc := c.drc
	c.drc = nil
	c.mu.Unlock()
	if drc != nil {
		go drc.Close()
	}
}

// Close closes the connection.
func (c *Conn) Close() {
	c.mu.Lock()
	drc := c.drc
	c.drc = nil
	c.mu.Unlock()
	if drc != nil {
		drc.Close()
	}
}

// List runs build(g) and returns its results as plain Go values. ctx bounds
// the wait (gremlin-go itself has no per-request context). A failure that is
// not a server-side error resets the connection.
func (c *Conn) List(ctx context.Context, build func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal) ([]any, error) {
	g, err := c.G()
	if err != nil {
		return nil, err
	}
	type res struct {
		out []any
		err error
	}
	ch := make(chan res, 1)
	go func() {
		rs, err := build(g).ToList()
		if err != nil {
			ch <- res{err: err}
			return
		}
		out := make([]any, 0, len(rs))
		for _, r := range rs {
			out = append(out, r.GetInterface())
		}
		ch <- res{out: out}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.err != nil && !isServerError(r.err) {
			c.Reset()
		}
		return r.out, r.err
	}
}

// isServerError reports whether err is an error response from the server
// (the connection is fine) rather than a transport failure.
func isServerError(err error) bool {
	// gremlin-go reports server status errors as E0502 (and auth as E0503).
	m := err.Error()
	return strings.Contains(m, "E0502") || strings.Contains(m, "E0503")
}

// Ping checks that the graph answers (for /readyz).
func (c *Conn) Ping(ctx context.Context) error {
	_, err := c.List(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V().Limit(1).Id()
	})
	return err
}
