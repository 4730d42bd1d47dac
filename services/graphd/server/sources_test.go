package server_test

import (
	"context"
	"strings"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/graphd/server"
)

func sourceConn(t *testing.T, srv *server.Server, source string) *gremlingo.GraphTraversalSource {
	t.Helper()
	conn, err := gremlingo.NewDriverRemoteConnection(srv.URL(), func(s *gremlingo.DriverRemoteConnectionSettings) {
		s.LogVerbosity = gremlingo.Off
		s.TraversalSource = source
	})
	if err != nil {
		t.Fatalf("connect to %s: %v", source, err)
	}
	t.Cleanup(conn.Close)
	return gremlingo.Traversal_().WithRemote(conn)
}

func names(t *testing.T, g *gremlingo.GraphTraversalSource) []string {
	t.Helper()
	var out []string
	for _, v := range toList(t, g.V().Values("name").Order()) {
		out = append(out, v.(string))
	}
	return out
}

// TestSeveralTraversalSources: each configured traversal source is its own
// graph (writes to one are not seen in another), they survive a restart in
// their own data directories, and an unknown source is refused by name.
func TestSeveralTraversalSources(t *testing.T) {
	dir := t.TempDir()
	cfg := func(c *server.Config) { c.Sources = []string{"gmodern", "gcrew"} }
	srv := graphdtest.Start(t, graphdtest.WithoutAuth(), graphdtest.WithDataDir(dir), graphdtest.WithConfig(cfg))
	for src, name := range map[string]string{"g": "in-g", "gmodern": "marko", "gcrew": "stephen"} {
		mustIterate(t, sourceConn(t, srv, src).AddV("person").Property("name", name))
	}
	check := func(srv *server.Server) {
		t.Helper()
		for src, want := range map[string]string{"g": "in-g", "gmodern": "marko", "gcrew": "stephen"} {
			if got := names(t, sourceConn(t, srv, src)); strings.Join(got, ",") != want {
				t.Errorf("source %s holds %v, want [%s]", src, got, want)
			}
		}
	}
	check(srv)
	_, err := sourceConn(t, srv, "gsink").V().Count().ToList()
	if err == nil || !strings.Contains(err.Error(), "gsink") || !strings.Contains(err.Error(), "gmodern") {
		t.Errorf("unknown traversal source: got %v, want an error naming it and the served sources", err)
	}
	if err := srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv2 := graphdtest.Start(t, graphdtest.WithoutAuth(), graphdtest.WithDataDir(dir), graphdtest.WithConfig(cfg))
	check(srv2)
	if _, err := server.New(server.Config{Listen: "127.0.0.1:0", Sources: []string{"bad name"}}); err == nil {
		t.Error("a source name with a space was accepted")
	}
	if _, err := server.New(server.Config{Listen: "127.0.0.1:0", Sources: []string{"ga", "ga"}}); err == nil {
		t.Error("a source given twice was accepted")
	}
}
