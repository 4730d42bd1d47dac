package server_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// typed renders a result with its Go type as gremlin-go decoded it, so a
// Long that comes back as an Int (or a list for a set) is a difference.
func typed(v any) string { return fmt.Sprintf("%T(%v)", v, norm(v)) }

func typedAll(vals []any) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = typed(v)
	}
	return out
}

// TestMath checks math() against TinkerPop's semantics (exp4j's expression
// language): precedence, associativity, unary minus, functions, variables
// resolved through by() modulators and scopes; the result is a Double.
func TestMath(t *testing.T) {
	g := modern(t)

	num := func(expr string) float64 {
		t.Helper()
		res := toList(t, g.Inject(2).Math(expr))
		if len(res) != 1 {
			t.Fatalf("math(%q): %d results", expr, len(res))
		}
		f, ok := res[0].(float64)
		if !ok {
			t.Fatalf("math(%q) returned %T, want a Double (float64)", expr, res[0])
		}
		return f
	}
	for _, c := range []struct {
		expr string
		want float64
	}{
		{"1 + 2 * 3", 7},
		{"(1 + 2) * 3", 9},
		{"10 - 4 - 3", 3},     // left-associative
		{"2 ^ 3 ^ 2", 512},    // right-associative
		{"-2 ^ 2", -4},        // ^ binds tighter than unary minus
		{"2 ^ -1", 0.5},       // unary after an operator
		{"-_ * 3", -6},        // unary minus binds tighter than *
		{"--_", 2},            // unary on unary
		{"7 % 3", 1},          // remainder
		{"-7 % 3", -1},        // Java's %: the sign of the dividend
		{"7 / 2", 3.5},        // always floating point
		{"1.5e2 + .5", 150.5}, // scientific notation, leading dot
		{"sqrt(16) + abs(-3)", 7},
		{"sin _", math.Sin(2)}, // exp4j: a function without parentheses
		{"log10(1000) + log2(8)", 6},
		{"signum(-_) + ceil(1.2) + floor(1.8)", 2},
		{"cbrt(27) + exp(0) + log(1)", 4},
		{"_ + _", 4},
		{"[_ + 1] * {2}", 6}, // exp4j accepts [] and {} as parentheses
	} {
		if got := num(c.expr); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("math(%q) = %v, want %v", c.expr, got, c.want)
		}
	}

	// sin, cos and tan are Java's to the last bit (Go's math.Sin(2) is one
	// unit in the last place off).
	for expr, want := range map[string]float64{"sin(2)": 0.9092974268256817, "cos(2)": -0.4161468365471424, "tan(2)": -2.185039863261519} {
		if got := num(expr); got != want {
			t.Errorf("math(%q) = %v, want exactly %v", expr, got, want)
		}
	}

	// Variables: _ and labels, each taking the next by() in turn.
	for _, c := range []struct {
		name string
		tr   GT
		want []string
	}{
		{"by(age) for _", g.V().Math("_+_").By("age"), []string{"float64(54)", "float64(58)", "float64(64)", "float64(70)"}},
		{"labels by round robin", g.V().As("a").Out("created").As("b").Math("b + a").By(__.In("created").Count()).By("age"),
			[]string{"float64(32)", "float64(33)", "float64(35)", "float64(38)"}},
		{"side effect", g.WithSideEffect("x", 100).V().Values("age").Math("_ + x"),
			[]string{"float64(127)", "float64(129)", "float64(132)", "float64(135)"}},
		{"map key", g.V().HasLabel("person").Project("a", "b").By("age").By(__.OutE().Count()).Math("a * b"),
			[]string{"float64(0)", "float64(64)", "float64(87)", "float64(35)"}},
		{"long variable name", g.V(1).OutE().As("expectedWeight").Math("expectedWeight + 1").By("weight"),
			[]string{"float64(1.4)", "float64(1.5)", "float64(2)"}},
	} {
		got := typedAll(toList(t, c.tr))
		if !sameMultiset(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}

	// Errors name the step and say what is wrong.
	for _, c := range []struct {
		tr   GT
		want string
	}{
		{g.V(1).Math("_ + 1"), "must resolve to a Number"},
		{g.Inject(1).Math("_ / 0"), "division by zero"},
		{g.Inject(1).Math("2_"), "implicit multiplication"},
		{g.Inject(1).Math("(_ + 1"), "mismatched parentheses"},
		{g.Inject(1).Math("_ +"), "missing an operand"},
		{g.Inject(1).Math("pow(_, 2)"), "pow()"},
		{g.Inject(1).Math("_ & 1"), "unexpected character"},
		{g.Inject(1).Math("nope + 1"), "must resolve to a Number"},
	} {
		_, err := c.tr.ToList()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "math") {
			t.Errorf("error %v should name math() and say %q", err, c.want)
		}
	}
}

func sameMultiset(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	count := map[string]int{}
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		count[s]--
		if count[s] < 0 {
			return false
		}
	}
	return true
}
