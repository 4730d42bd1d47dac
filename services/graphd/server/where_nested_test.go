package server_test

import (
	"testing"
)

// TestNestedWhereLabels checks a where() inside a where() traversal: the
// inner one scopes its own start labels (on the same path).
func TestNestedWhereLabels(t *testing.T) {
	g := modern(t)
	checkResults(t, []resultCase{
		{"inner where on an outer label", g.V().As("a").Where(__.Out().Where(__.As("a").Has("name", "marko"))).Values("name"), "marko"},
		{"or() of a count and a where", g.V().As("a").Out().As("b").Where(__.As("b").In().Count().Is(3).Or().Where(__.As("b").Out("created").And().As("b").Has(T.Label, "person"))).Select("a", "b").By("name"),
			"{a:josh,b:lop} {a:marko,b:josh} {a:marko,b:lop} {a:peter,b:lop}"},
	})
}
