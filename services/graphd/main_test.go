package main

import (
	"context"
	"slices"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/services/graphd/server"
)

// TestSourcesFlag: -sources gmodern,gcrew serves each name as its own graph.
func TestSourcesFlag(t *testing.T) {
	names := parseSources(" gmodern, gcrew,,")
	if !slices.Equal(names, []string{"gmodern", "gcrew"}) {
		t.Fatalf("parseSources: %v", names)
	}
	srv, err := server.New(server.Config{Listen: "127.0.0.1:0", Sources: names})
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
	if _, err := server.New(server.Config{Listen: "127.0.0.1:0", Sources: parseSources("bad name")}); err == nil {
		t.Error("a source name with a space was accepted")
	}
}
