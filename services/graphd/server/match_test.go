package server_test

import (
	"strings"
	"testing"
)

// TestMatch checks match() beyond TinkerPop's suite: the pattern order does
// not change the answer, labels bound before match() are joined on, a
// labelled infix and() starts its right operand, and a pattern that can never
// start is refused as TinkerPop refuses it.
func TestMatch(t *testing.T) {
	g := modern(t)
	for _, c := range []struct {
		name string
		tr   GT
		want []string
	}{
		{"chain", g.V().Match(__.As("a").Out("knows").As("b"), __.As("b").Out("created").As("c")).Select("a", "b", "c").By("name"),
			[]string{"{a:marko,b:josh,c:lop}", "{a:marko,b:josh,c:ripple}"}},
		{"chain, patterns reversed", g.V().Match(__.As("b").Out("created").As("c"), __.As("a").Out("knows").As("b")).Select("a", "b", "c").By("name"),
			[]string{"{a:marko,b:josh,c:lop}", "{a:marko,b:josh,c:ripple}"}},
		{"joined on labels bound before match", g.V().As("a").Out("created").As("b").Match(__.As("b").In("created").As("a")).Select("a").By("name"),
			[]string{"josh", "josh", "marko", "peter"}},
		{"barrier pattern keeps the path", g.V().Match(__.As("a").Out("created").Count().As("n"), __.As("a").Has("name", "josh")).Select("n"),
			[]string{"2"}},
		{"not() pattern", g.V().Match(__.As("a").Out("created").As("b"), __.Not(__.As("b").In("created").Has("name", "peter"))).Select("a", "b").By("name"),
			[]string{"{a:josh,b:ripple}"}},
		{"labelled infix and()", g.V().As("a").Out("created").And().As("a").Has("name", "josh"),
			[]string{"v[4]"}},
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
		if got := norms(vals, false); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		tr   GT
		want string
	}{
		{g.V().Match(__.As("a").Out().As("b"), __.As("c").Out().As("d")), "The provided match pattern is unsolvable"},
		{g.V().Match(__.Out().As("b")), "All match()-traversals must have a single start label"},
		{g.V().Match(__.As("a").Out().As("b").As("c")), "The end step of a match()-traversal can have at most one label"},
	} {
		_, err := c.tr.ToList()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v should say %q", err, c.want)
		}
	}
}
