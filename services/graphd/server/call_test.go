package server_test

import (
	"strings"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

// TestCall checks call() and the services graphd registers as TinkerGraph
// does: the directory (names and verbose descriptions), tinker.search (a
// start service matching the Java string of property values) and
// tinker.degree.centrality (a streaming service), and the errors TinkerPop
// gives for an unknown service or a service used where it cannot run.
func TestCall(t *testing.T) {
	g := modern(t)
	checkResults(t, []resultCase{
		{"directory", g.Call(), "tinker.degree.centrality tinker.search"},
		{"directory, verbose", g.Call("--list").With("service", "tinker.degree.centrality").With("verbose", true),
			`{"name":"tinker.degree.centrality","type:[requirements]:":{"Streaming":[]},"params":{"direction":"Specify the edge direction (optional), default is Direction.IN"}}`},
		{"search by regex", g.Call("tinker.search").With("regex", "[jr].*").Element().Values("name"), "josh lop ripple ripple"}, // lang java too
		{"search a double as Java writes it", g.Call("tinker.search", map[any]any{"regex": `0\.4`}).Element().Id(), "11 9"},
		{"search edges only", g.Call("tinker.search").With("search", "a").With("type", "Edge"), ""},
		{"degree, both directions", g.V(1).Call("tinker.degree.centrality").With("direction", gremlingo.Direction.Both), "3"},
		{"degree in a filter", g.V().Where(__.Call("tinker.degree.centrality").Is(int64(3))).Values("name"), "lop"},
	})
	for _, c := range []struct {
		tr   GT
		want string
	}{
		{g.Call("tinker.pagerank"), "Unrecognized service: tinker.pagerank"},
		{g.Call("tinker.degree.centrality"), "This service cannot be used to start a traversal."},
		{g.V().Call("tinker.search").With("search", "x"), "This service cannot be used mid-traversal."},
		{g.V().Call("--list"), "Directory service can only be used to start a traversal."},
		{g.Call("tinker.search"), "Missing search/regex parameter"},
		{g.Call("tinker.search").With("search", "x").With("type", "Path"), "Type must be one of Vertex/Edge/VertexProperty: Path"},
		{g.Call("tinker.search").With("regex", `(a)\1`), "Java regex syntax graphd does not support"},
	} {
		_, err := c.tr.ToList()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v should say %q", err, c.want)
		}
	}
}
