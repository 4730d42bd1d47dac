package server_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/graphd/server"
)

var (
	__ = gremlingo.T__
	T  = gremlingo.T
	P  = gremlingo.P
	TP = gremlingo.TextP
)

// connect opens a gremlin-go connection (closed at test end).
func connect(t testing.TB, srv *server.Server, user, pass string) (*gremlingo.GraphTraversalSource, *gremlingo.DriverRemoteConnection) {
	t.Helper()
	conn, err := gremlingo.NewDriverRemoteConnection(srv.URL(), func(s *gremlingo.DriverRemoteConnectionSettings) {
		s.LogVerbosity = gremlingo.Off
		if user != "" {
			s.AuthInfo = gremlingo.BasicAuthInfo(user, pass)
		}
	})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(conn.Close)
	return gremlingo.Traversal_().WithRemote(conn), conn
}

func writer(t testing.TB, srv *server.Server) *gremlingo.GraphTraversalSource {
	g, _ := connect(t, srv, graphdtest.WriterUser, graphdtest.WriterPassword)
	return g
}

func mustIterate(t testing.TB, tr *gremlingo.GraphTraversal) {
	t.Helper()
	if err := <-tr.Iterate(); err != nil {
		t.Fatalf("iterate: %v", err)
	}
}

func toList(t testing.TB, tr *gremlingo.GraphTraversal) []any {
	t.Helper()
	res, err := tr.ToList()
	if err != nil {
		t.Fatalf("toList: %v", err)
	}
	out := make([]any, len(res))
	for i, r := range res {
		out[i] = r.Data
	}
	return out
}

// modern is a writer's traversal source on a fresh in-memory graphd holding TinkerPop's
// "modern" toy graph.
func modern(t testing.TB) *gremlingo.GraphTraversalSource {
	t.Helper()
	g := writer(t, graphdtest.Start(t, graphdtest.InMemory()))
	loadModern(t, g)
	return g
}

// loadModern loads TinkerPop's "modern" toy graph.
func loadModern(t testing.TB, g *gremlingo.GraphTraversalSource) {
	t.Helper()
	type pv struct {
		id   int64
		lbl  string
		name string
		age  int32
		lang string
	}
	for _, v := range []pv{
		{1, "person", "marko", 29, ""}, {2, "person", "vadas", 27, ""}, {3, "software", "lop", 0, "java"},
		{4, "person", "josh", 32, ""}, {5, "software", "ripple", 0, "java"}, {6, "person", "peter", 35, ""},
	} {
		tr := g.AddV(v.lbl).Property(T.Id, v.id).Property("name", v.name)
		if v.lang != "" {
			tr = tr.Property("lang", v.lang)
		} else {
			tr = tr.Property("age", v.age)
		}
		mustIterate(t, tr)
	}
	for _, e := range []struct {
		id, out, in int64
		lbl         string
		w           float64
	}{
		{7, 1, 2, "knows", 0.5}, {8, 1, 4, "knows", 1.0}, {9, 1, 3, "created", 0.4},
		{10, 4, 5, "created", 1.0}, {11, 4, 3, "created", 0.4}, {12, 6, 3, "created", 0.2},
	} {
		mustIterate(t, g.AddE(e.lbl).From(__.V(e.out)).To(__.V(e.in)).Property(T.Id, e.id).Property("weight", e.w))
	}
}

// norm renders a result as a stable string.
func norm(v any) string {
	switch x := v.(type) {
	case *gremlingo.Vertex:
		return fmt.Sprintf("v[%v]", x.Id)
	case *gremlingo.Edge:
		return fmt.Sprintf("e[%v]", x.Id)
	case *gremlingo.VertexProperty:
		return fmt.Sprintf("vp[%s->%v]", x.Label, norm(x.Value))
	case *gremlingo.Property:
		return fmt.Sprintf("p[%s->%v]", x.Key, norm(x.Value))
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = norm(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *gremlingo.Path:
		return "path" + norm(x.Objects)
	case map[any]any:
		parts := make([]string, 0, len(x))
		for k, e := range x {
			parts = append(parts, norm(k)+":"+norm(e))
		}
		sort.Strings(parts)
		return "{" + strings.Join(parts, ",") + "}"
	case *gremlingo.SimpleSet:
		parts := make([]string, 0)
		for _, e := range x.ToSlice() {
			parts = append(parts, norm(e))
		}
		sort.Strings(parts)
		return "set{" + strings.Join(parts, ",") + "}"
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

func norms(vals []any, ordered bool) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = norm(v)
	}
	if !ordered {
		sort.Strings(out)
	}
	return out
}

// resultCase is a traversal and its results as norms gives them, unordered, joined by spaces.
type resultCase struct {
	name string
	tr   GT
	want string
}

// checkResults runs each case and compares its results with want.
func checkResults(t testing.TB, cases []resultCase) {
	t.Helper()
	for _, c := range cases {
		res, err := c.tr.ToList()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		vals := make([]any, len(res))
		for i, r := range res {
			vals[i] = r.Data
		}
		if got := strings.Join(norms(vals, false), " "); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
