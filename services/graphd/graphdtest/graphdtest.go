// Package graphdtest starts an in-process graphd for tests.
//
//	srv := graphdtest.Start(t)
//	g := graphdtest.Writer(t, srv.URL()) // a gremlin-go traversal source with write credentials
package graphdtest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"

	"github.com/worldgate/worldgate/services/graphd/server"
)

// Default development credentials.
const (
	WriterUser     = "worldgate"
	WriterPassword = "worldgate-dev"
	ReaderUser     = "reader"
	ReaderPassword = "reader-dev"
)

// DefaultUsers are the writer and read-only users graphdtest configures.
func DefaultUsers() []server.User {
	return []server.User{
		{Name: WriterUser, Password: WriterPassword},
		{Name: ReaderUser, Password: ReaderPassword, ReadOnly: true},
	}
}

// Option adjusts the server configuration.
type Option func(*server.Config)

// WithoutAuth disables authentication.
func WithoutAuth() Option { return func(c *server.Config) { c.Users = nil } }

// WithUsers replaces the default users.
func WithUsers(users ...server.User) Option { return func(c *server.Config) { c.Users = users } }

// WithDataDir uses dir instead of a fresh temporary directory.
func WithDataDir(dir string) Option { return func(c *server.Config) { c.DataDir = dir } }

// InMemory runs without a data directory.
func InMemory() Option { return func(c *server.Config) { c.DataDir = "" } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *server.Config) { c.Logger = l } }

// WithConfig lets a test adjust any other field.
func WithConfig(f func(*server.Config)) Option { return Option(f) }

// Start starts graphd on 127.0.0.1:0 with a temporary data directory and the
// default users, and closes it when the test ends.
func Start(t testing.TB, opts ...Option) *server.Server {
	t.Helper()
	cfg := server.Config{
		Listen:  "127.0.0.1:0",
		DataDir: t.TempDir(),
		Users:   DefaultUsers(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("graphdtest: %v", err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("graphdtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("graphdtest: close: %v", err)
		}
	})
	return srv
}

// Writer connects to the graphd at url (ws://…/gremlin) with the gremlin-go client as the
// writer user and returns its traversal source; the connection closes when the test ends.
func Writer(t testing.TB, url string) *gremlingo.GraphTraversalSource {
	t.Helper()
	conn, err := gremlingo.NewDriverRemoteConnection(url, func(s *gremlingo.DriverRemoteConnectionSettings) {
		s.AuthInfo = gremlingo.BasicAuthInfo(WriterUser, WriterPassword)
		s.LogVerbosity = gremlingo.Off
	})
	if err != nil {
		t.Fatalf("connect to graphd at %s as the writer: %v", url, err)
	}
	t.Cleanup(conn.Close)
	return gremlingo.Traversal_().WithRemote(conn)
}
