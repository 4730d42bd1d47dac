package server_test

import (
	"strings"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

// TestSelectTraversalAndToDirection checks select(traversal) (the key is the
// traversal's first result: a map key compared as Java's equals, else a step
// label or side effect, with Pop) and to/toE/toV(Direction, labels) as the
// vertex steps they stand for.
func TestSelectTraversalAndToDirection(t *testing.T) {
	g := modern(t)
	Pop, D := gremlingo.Pop, gremlingo.Direction
	checkResults(t, []resultCase{
		{"map key from a label", g.V(1, 2).As("a").Group("m").By().By(__.BothE().Count()).Barrier().Select("m").Select(__.Select("a")), "1 3"},
		{"step label with Pop.all", g.V(1).As("a").Out("knows").As("a").Select(Pop.All, __.Constant("a")).By(__.Unfold().Values("name").Fold()), "[marko,josh] [marko,vadas]"},
		{"no such key", g.V(1).Select(__.Constant("zzz")), ""},
		{"key traversal without a result", g.V(1).Select(__.Out("nothing")), ""},
		{"to(OUT, knows)", g.V(1).To(D.Out, "knows").Values("name"), "josh vadas"},
		{"toE(IN)", g.V(3).ToE(D.In).Id(), "11 12 9"},
		{"toV(OUT)", g.E(7).ToV(D.Out).Id(), "1"},
	})
}

// TestOrderShuffle checks Order.shuffle as TinkerPop's MultiComparator
// applies it: last, it shuffles the traversers (all of them, each once);
// followed by other comparators, those alone order.
func TestOrderShuffle(t *testing.T) {
	g := modern(t)
	Order := gremlingo.Order
	got := strings.Join(norms(toList(t, g.V().Values("name").Order().By(Order.Shuffle)), false), " ")
	if want := "josh lop marko peter ripple vadas"; got != want {
		t.Errorf("shuffle: got %q, want %q", got, want)
	}
	got = strings.Join(norms(toList(t, g.V().Order().By(Order.Shuffle).By("name").Values("name")), true), " ")
	if want := "josh lop marko peter ripple vadas"; got != want {
		t.Errorf("shuffle then name: got %q, want %q", got, want)
	}
	got = strings.Join(norms(toList(t, g.V().Order().By("age", Order.Shuffle).Values("name")), false), " ")
	if want := "josh marko peter vadas"; got != want {
		t.Errorf("by(age, shuffle) keeps the vertices with an age: got %q, want %q", got, want)
	}
}
