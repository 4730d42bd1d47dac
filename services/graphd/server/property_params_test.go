package server_test

import (
	"testing"
)

// TestPropertyTraversalArguments checks property() keys and values given as
// traversals: folded into addV()/addE() they run on the incoming traverser
// (TinkerPop's Parameters), a property() step's run on its element, and a
// key traversal gives the key.
func TestPropertyTraversalArguments(t *testing.T) {
	g := modern(t)
	checkResults(t, []resultCase{
		{"addV value from the incoming vertex", g.V(1, 2).AddV("animal").Property("name", __.Values("name")).Values("name"), "marko vadas"},
		{"addV key and value traversals", g.V(3).AddV("animal").Property(__.Values("name"), __.Label()).Values("lop"), "software"},
		{"key from a side effect", g.WithSideEffect("a", "name").AddV().Property(__.Select("a"), "kitty").Values("name"), "kitty"},
		{"addE value from the incoming vertex", g.V(6).AddE("likes").To(__.V(1)).Property("by", __.Values("name")).Values("by"), "peter"},
		{"property() step on its element", g.V(4).Property(__.Constant("nick"), __.Values("name")).Values("nick"), "josh"},
	})
}
