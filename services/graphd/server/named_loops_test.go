package server_test

import (
	"strings"
	"testing"
)

// TestNamedLoops checks repeat(name, traversal) and loops(name): inside a
// nested repeat loops(name) counts the named (outer) loop, loops() the
// innermost; a name no enclosing loop has is refused as TinkerPop refuses it.
func TestNamedLoops(t *testing.T) {
	g := modern(t)
	checkResults(t, []resultCase{
		{"outer count inside the inner loop", g.V(1).Repeat("a", __.Repeat("b", __.Out().SideEffect(__.Loops("a").Aggregate("x"))).Times(1)).Times(2).Cap("x"), "[0,0,0,1,1]"},
		{"inner count", g.V(1).Repeat("a", __.Repeat("b", __.Out().SideEffect(__.Loops().Aggregate("x"))).Times(1)).Times(2).Cap("x"), "[0,0,0,0,0]"},
		{"until on the named loop", g.V(1).Repeat("a", __.Out()).Until(__.Loops("a").Is(1)).Values("name"), "josh lop vadas"},
	})
	if _, err := g.V(1).Repeat("a", __.Out().Filter(__.Loops("zz").Is(0))).Times(1).ToList(); err == nil || !strings.Contains(err.Error(), "Loop name not defined: zz") {
		t.Errorf("unknown loop name: %v", err)
	}
}
