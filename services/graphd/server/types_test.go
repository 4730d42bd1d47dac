package server_test

import (
	"math/big"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

// TestResultTypes checks that results keep TinkerPop's number types and
// Set/List through gremlin-go: a Long stays a Long, a global sum of Integers
// is a Long, mixed numbers widen as NumberHelper widens them, dedup(local)
// is a Set.
func TestResultTypes(t *testing.T) {
	g := modern(t)
	bd := func(unscaled int64, scale int32) *gremlingo.BigDecimal {
		return &gremlingo.BigDecimal{Scale: scale, UnscaledValue: *big.NewInt(unscaled)}
	}
	for _, c := range []struct {
		name string
		tr   GT
		want []string
	}{
		// gremlin-go itself sends inject()/constant() arguments that fit
		// in 32 bits as Integers (its int32Args); a Long it sends inside a
		// list stays a Long.
		{"inject(long) in a list", g.Inject([]any{int64(7)}).Unfold(), []string{"int64(7)"}},
		{"inject(int)", g.Inject(int32(7)), []string{"int32(7)"}},
		{"constant(long) in a list", g.Inject(1).Constant([]any{int64(5)}).Unfold(), []string{"int64(5)"}},
		{"property long", g.Inject(1).Project("x").By(__.Constant([]any{int64(5), int32(6)})).Select("x").Unfold(), []string{"int64(5)", "int32(6)"}},
		{"sum of ints is a long", g.V().Values("age").Sum(), []string{"int64(123)"}},
		{"sum(local) of ints stays an int", g.V().Values("age").Fold().Sum(gremlingo.Scope.Local), []string{"int32(123)"}},
		{"sum of floats is a double", g.Inject(float32(1.5), float32(2)).Sum(), []string{"float64(3.5)"}},
		{"sum(local) of floats stays a float", g.Inject([]any{float32(1.5), float32(2)}).Sum(gremlingo.Scope.Local), []string{"float32(3.5)"}},
		{"sum int+double", g.Inject(int32(1), 0.5).Sum(), []string{"float64(1.5)"}},
		{"sum of BigDecimals", g.Inject(bd(15, 1), bd(25, 2)).Sum(), []string{"*gremlingo.BigDecimal(&{2 {false [175]}})"}},
		{"max int vs double widens", g.Inject([]any{int32(29), 0.5}).Max(gremlingo.Scope.Local), []string{"float64(29)"}},
		{"min int vs long widens", g.Inject([]any{int32(3), int64(4)}).Unfold().Min(), []string{"int64(3)"}},
		{"max ints stays int", g.V().Values("age").Max(), []string{"int32(35)"}},
		{"max skips NaN", g.Inject(1.0, gremlingoNaN(), 2.0).Max(), []string{"float64(2)"}},
		{"mean of ints is a double", g.V().Values("age").Mean(), []string{"float64(30.75)"}},
		{"mean of BigDecimals is a BigDecimal", g.Inject(bd(1, 0), bd(2, 0)).Mean(), []string{"*gremlingo.BigDecimal(&{1 {false [15]}})"}},
		{"fold(int, sum) stays int", g.V().Values("age").Fold(int32(0), gremlingo.Operator.Sum), []string{"int32(123)"}},
		{"fold(long, sum) is long", g.V().Values("age").Fold(int64(0), gremlingo.Operator.Sum), []string{"int64(123)"}},
		{"int division truncates", g.Inject(int32(7)).Fold(int32(14), gremlingo.Operator.Div), []string{"int32(2)"}},
		{"int overflow widens, never wraps", g.Inject(int32(2147483647), int32(1)).Fold(int32(0), gremlingo.Operator.Sum), []string{"int64(2147483648)"}},
		{"dedup(local) is a set", g.Inject([]any{int32(1), int32(1), int32(2)}).Dedup(gremlingo.Scope.Local), []string{"*gremlingo.SimpleSet(set{1,2})"}},
		{"dedup(local) of a scalar", g.Inject(int32(1)).Dedup(gremlingo.Scope.Local), []string{"*gremlingo.SimpleSet(set{1})"}},
	} {
		got := typedAll(toList(t, c.tr))
		if !sameMultiset(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := g.Inject(int32(0)).Fold(int32(1), gremlingo.Operator.Div).ToList(); err == nil {
		t.Error("integer division by zero: no error")
	}
}

func gremlingoNaN() float64 {
	var zero float64
	return zero / zero
}
