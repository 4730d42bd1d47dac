package tinkerpop_test

import (
	"path/filepath"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

// BenchmarkGratefulRepeat runs the suite's grateful-dead repeat() traversals
// (one op = one traversal through gremlin-go, results counted by graphd):
//
//	go test -run X -bench GratefulRepeat -benchtime 5x ./graphd/tinkerpop
func BenchmarkGratefulRepeat(b *testing.B) {
	dir := suiteDir(b)
	env := startGraph(b, filepath.Join(dir, "data"), "grateful")
	if env.err != nil {
		b.Fatal(env.err)
	}
	g := env.g
	__ := gremlingo.T__
	cases := []struct {
		name string
		t    func() *gremlingo.GraphTraversal
	}{
		{"repeat_out_times3_count", func() *gremlingo.GraphTraversal { return g.V().Repeat(__.Out()).Times(3).Count() }},
		{"repeat_out_times5_count", func() *gremlingo.GraphTraversal { return g.V().Repeat(__.Out()).Times(5).Count() }},
		{"repeat_out_times8_count", func() *gremlingo.GraphTraversal { return g.V().Repeat(__.Out()).Times(8).Count() }},
		{"repeat_out_times5_as_a_out_writtenBy_as_b_select_count", func() *gremlingo.GraphTraversal {
			return g.V().Repeat(__.Out()).Times(5).As("a").Out("writtenBy").As("b").Select("a", "b").Count()
		}},
		{"repeat_both_followedBy_times2_group_songType_count", func() *gremlingo.GraphTraversal {
			return g.V().Repeat(__.Both("followedBy")).Times(2).Group().By("songType").By(__.Count())
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := c.t().ToList(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
