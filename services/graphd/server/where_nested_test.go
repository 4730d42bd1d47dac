package server_test

import (
	"strings"
	"testing"

	"github.com/worldgate/worldgate/services/graphd/graphdtest"
)

// TestNestedWhereLabels checks a where() inside a where() traversal: the
// inner one scopes its own start labels (on the same path).
func TestNestedWhereLabels(t *testing.T) {
	srv := graphdtest.Start(t, graphdtest.InMemory())
	g := writer(t, srv)
	loadModern(t, g)
	for _, c := range []struct {
		name string
		tr   GT
		want string
	}{
		{"inner where on an outer label", g.V().As("a").Where(__.Out().Where(__.As("a").Has("name", "marko"))).Values("name"), "marko"},
		{"or() of a count and a where", g.V().As("a").Out().As("b").Where(__.As("b").In().Count().Is(3).Or().Where(__.As("b").Out("created").And().As("b").Has(T.Label, "person"))).Select("a", "b").By("name"),
			"{a:josh,b:lop} {a:marko,b:josh} {a:marko,b:lop} {a:peter,b:lop}"},
	} {
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
