package server_test

import (
	"strings"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

// TestDedupLabels: dedup("a", "b") keeps the first traverser of each
// combination of labelled objects (through by()); dedup(local, labels)
// ignores the labels, as TinkerPop does.
func TestDedupLabels(t *testing.T) {
	g := modern(t)
	for _, c := range []struct {
		name    string
		tr      GT
		want    []string
		ordered bool
	}{
		{"pairs", g.V(1).As("a").Both().Both().As("b").Dedup("a", "b").Select("b").Values("name"),
			[]string{"josh", "lop", "marko", "peter", "ripple"}, false},
		{"by age (unproductive filters)", g.V(1).As("a").Both().As("b").Both().As("c").Dedup("a", "b").By("age").Select("b").Values("name"),
			[]string{"josh", "vadas"}, false},
		{"by label", g.V(1).As("a").Both().As("b").Dedup("a", "b").By(T.Label).Count(), []string{"2"}, true},
		{"local ignores labels", g.Inject([]any{int32(1), int32(1)}).Dedup(gremlingo.Scope.Local, "x").Unfold(), []string{"1"}, true},
	} {
		got := norms(toList(t, c.tr), c.ordered)
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := g.V(1).As("a").Dedup("a", "nope").ToList(); err == nil || !strings.Contains(err.Error(), "label nope") {
		t.Errorf("a missing label: %v", err)
	}
}
