package server_test

import (
	"strings"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
)

// TestMergeEdgeResolution checks how mergeE() resolves its Direction.OUT/IN
// values as TinkerPop's MergeEdgeStep does: Merge.outV/inV options that give
// a vertex, an onCreate map repeating the merge map's vertex, a vertex id
// that does not exist (no match, and creating names the id), and a map
// without directions that matches nothing (TinkerPop's sentence).
func TestMergeEdgeResolution(t *testing.T) {
	Merge, D := gremlingo.Merge, gremlingo.Direction
	srv := graphdtest.Start(t, graphdtest.InMemory())
	g := writer(t, srv)
	mustIterate(t, g.AddV("person").Property(T.Id, "a").AddV("person").Property(T.Id, "b"))

	knows := map[any]any{D.Out: Merge.OutV, D.In: Merge.InV, T.Label: "knows"}
	byOption := func() GT {
		return g.V("a").As("x").V("b").As("y").MergeE(knows).Option(Merge.OutV, __.Select("x")).Option(Merge.InV, __.Select("y"))
	}
	mustIterate(t, byOption())
	mustIterate(t, byOption()) // matches the edge it created
	if got := one(t, g.V("a").Out("knows").Id()); got != "b" {
		t.Errorf("Merge.outV/inV by vertex: %v", got)
	}

	va, vb := toList(t, g.V("a"))[0], toList(t, g.V("b"))[0]
	likes := map[any]any{D.Out: va, D.In: vb, T.Label: "likes"}
	onCreate := map[any]any{D.Out: va, D.In: vb, T.Label: "likes", "since": "2020"}
	if got := one(t, g.MergeE(likes).Option(Merge.OnCreate, onCreate).Values("since")); got != "2020" {
		t.Errorf("onCreate repeating the merge map's vertices: %v", got)
	}

	for _, c := range []struct {
		tr   GT
		want string
	}{
		{g.MergeE(map[any]any{D.Out: "zzz", D.In: "b", T.Label: "knows"}), "Vertex id could not be resolved from mergeE: zzz"},
		{g.MergeE(map[any]any{T.Label: "hates"}), "Out Vertex not specified in onCreate - edge cannot be created"},
		{g.MergeE(map[any]any{D.Out: "a", T.Label: "hates"}), "In Vertex not specified in onCreate - edge cannot be created"},
		{g.MergeE(map[any]any{D.Out: Merge.OutV, D.In: "b"}), "option(outV) must be specified if it is used for OUT"},
	} {
		_, err := c.tr.ToList()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v should say %q", err, c.want)
		}
	}
	if got := one(t, g.E().Count()); got != "2" {
		t.Errorf("edges after the refused merges: %v", got)
	}
}
