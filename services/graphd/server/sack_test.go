package server_test

import (
	"strings"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

// TestSack checks withSack/sack()/barrier() against TinkerPop's semantics.
func TestSack(t *testing.T) {
	g := modern(t)
	Op := gremlingo.Operator
	for _, c := range []struct {
		name string
		tr   GT
		want []string
	}{
		{"initial sack", g.WithSack("x").V(1).Sack(), []string{"string(x)"}},
		{"no withSack: null", g.V(1).Sack(), []string{"<nil>(null)"}},
		{"assign by label", g.WithSack("hello").V(1).OutE().Sack(Op.Assign).By(T.Label).InV().Sack(),
			[]string{"string(knows)", "string(knows)", "string(created)"}},
		{"sum along paths", g.WithSack(0.0).V(1).Repeat(__.OutE().Sack(Op.Sum).By("weight").InV()).Times(2).Sack(),
			[]string{"float64(2)", "float64(1.4)"}},
		{"unproductive by filters", g.V().Sack(Op.Assign).By("age").Sack(),
			[]string{"int32(29)", "int32(27)", "int32(32)", "int32(35)"}},
		{"reducing step starts a new sack", g.WithSack(int32(1)).V(1).Sack(Op.Sum).By(__.Constant(int32(5))).Count().Sack(),
			[]string{"int32(1)"}},
		{"barrier merges sacks with the operator, bulk kept", g.WithSack(int32(1), Op.Sum).V().Out().Barrier().Sack(),
			[]string{"int32(3)", "int32(3)", "int32(3)", "int32(1)", "int32(1)", "int32(1)"}},
		{"withBulk(false): merged once", g.WithBulk(false).WithSack(int32(1), Op.Sum).V().Out().Barrier().Sack(),
			[]string{"int32(3)", "int32(1)", "int32(1)", "int32(1)"}},
		{"no merge operator: no merge", g.WithSack(int32(1)).V().Out().Barrier().Sack(),
			[]string{"int32(1)", "int32(1)", "int32(1)", "int32(1)", "int32(1)", "int32(1)"}},
		{"normSack", g.WithSack(1.0, Op.Sum).V(1).Local(__.Out("knows").Barrier(gremlingo.Barrier.NormSack)).Sack(),
			[]string{"float64(0.5)", "float64(0.5)"}},
		{"math by sack", g.WithSack(int32(1)).Inject(1).Repeat(__.Sack(Op.Sum).By(__.Constant(int32(1)))).Times(2).Emit().Math("_ * 10").By(__.Sack()),
			[]string{"float64(20)", "float64(30)"}},
	} {
		got := typedAll(toList(t, c.tr))
		if !sameMultiset(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		tr   GT
		want string
	}{
		{g.WithSack(int32(1), Op.Sum).V().Out().As("a").Barrier().Select("a"), "barrier() merging"},
		{g.WithSack(int32(1)).V(1).Sack(Op.Sum).By("name"), "sack(sum)"},
		{g.V(1).Barrier(gremlingo.Barrier.NormSack), "normSack"},
	} {
		_, err := c.tr.ToList()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v should say %q", err, c.want)
		}
	}
}
