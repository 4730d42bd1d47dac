package main

import (
	"context"
	"flag"
	"slices"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/services/graphd/server"
)

// parse parses graphd's flags from args, as main does.
func parse(t *testing.T, args ...string) server.ServiceConfig {
	t.Helper()
	c := server.DefaultServiceConfig()
	fs := flag.NewFlagSet("graphd", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSourcesFlag: -sources gmodern,gcrew serves each name as its own graph.
func TestSourcesFlag(t *testing.T) {
	c := parse(t, "-listen", "127.0.0.1:0", "-data", "", "-sources", " gmodern, gcrew,,")
	cfg, err := c.Config(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Sources, []string{"gmodern", "gcrew"}) {
		t.Fatalf("-sources: %v", cfg.Sources)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	source := func(name string) *gremlingo.GraphTraversalSource {
		conn, err := gremlingo.NewDriverRemoteConnection(srv.URL(), func(s *gremlingo.DriverRemoteConnectionSettings) {
			s.LogVerbosity = gremlingo.Off
			s.TraversalSource = name
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		return gremlingo.Traversal_().WithRemote(conn)
	}
	if err := <-source("gmodern").AddV("person").Iterate(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"gmodern": 1, "gcrew": 0, "g": 0} {
		res, err := source(name).V().Count().ToList()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := res[0].GetInterface(); got != want {
			t.Errorf("%s: %v vertices, want %d", name, got, want)
		}
	}
	c.Sources = "bad name"
	if cfg, err = c.Config(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := server.New(cfg); err == nil {
		t.Error("a source name with a space was accepted")
	}
}

// TestFlagsCheck: a bad -users entry or -log-level stops graphd before it starts; -users gives
// the server its users, ":ro" read-only.
func TestFlagsCheck(t *testing.T) {
	for _, args := range [][]string{{"-users", "nopassword"}, {"-users", "a:b:rx"}, {"-log-level", "loud"}} {
		c := parse(t, args...)
		if err := c.Check(); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
	c := parse(t, "-users", "w:pw, r:rpw:ro")
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.Config(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []server.User{{Name: "w", Password: "pw"}, {Name: "r", Password: "rpw", ReadOnly: true}}
	if !slices.Equal(cfg.Users, want) {
		t.Errorf("-users: %+v, want %+v", cfg.Users, want)
	}
}
