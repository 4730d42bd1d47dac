package server_test

import (
	"strings"
	"testing"
)

// TestNullPropertyKeys checks null among property keys as TinkerPop treats
// it: a null key names no property, so has(null) keeps nothing, a null
// among other keys is ignored, and only null keys select no property (where
// no keys select all).
func TestNullPropertyKeys(t *testing.T) {
	g := modern(t)
	for _, c := range []struct {
		name string
		tr   GT
		want string
	}{
		{"has(null)", g.V().Has(nil), ""},
		{"has(null, value)", g.V().Has(nil, "marko"), ""},
		{"values(name, null)", g.V(1).Values("name", nil), "marko"},
		{"values(null)", g.V(1).Values(nil), ""},
		{"properties(null)", g.V(1).Properties(nil), ""},
		{"valueMap(name, null)", g.V(1).ValueMap("name", nil), "{name:[marko]}"},
		{"valueMap(null)", g.V(1).ValueMap(nil), "{}"},
		{"elementMap(null)", g.V(1).ElementMap(nil), "{id:1,label:person}"},
	} {
		got := strings.Join(norms(toList(t, c.tr), true), " ")
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
