package tinkerpop_test

import (
	"math/big"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

// TestMatcherComparesTypes: the suite's matcher is as strict as TinkerPop's
// runners: a number of another type, or a list for a set, is a wrong answer;
// only the literals gremlin-go's translation widens (Java 1 and 1i sent as a
// Long, 0.5f as a Double) may come back widened.
func TestMatcherComparesTypes(t *testing.T) {
	n := &names{}
	parse := func(s string) any {
		t.Helper()
		v, err := parseValue(s, n, false)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return v
	}
	set := func(items ...any) *gremlingo.SimpleSet {
		s := gremlingo.NewSimpleSet()
		for _, i := range items {
			s.Add(i)
		}
		return s
	}
	for _, c := range []struct {
		exp  string
		act  any
		same bool
	}{
		{"d[1].l", int64(1), true},
		{"d[1].l", int32(1), false},
		{"d[1].i", int32(1), true},
		{"d[1].i", int64(1), false},
		{"d[1].d", 1.0, true},
		{"d[1].d", float32(1), false},
		{"d[1].d", int64(1), false},
		{"d[1].f", float32(1), true},
		{"d[1].s", int16(1), true},
		{"d[1].s", int32(1), false},
		{"d[1].b", uint8(1), true},
		{"d[1].n", big.NewInt(1), true},
		{"d[1].n", int64(1), false},
		{"s[d[1].i,d[2].i]", set(int32(2), int32(1)), true},
		{"s[d[1].i,d[2].i]", []any{int32(1), int32(2)}, false},
		{"l[d[1].i,d[2].i]", []any{int32(1), int32(2)}, true},
		{"l[d[1].i,d[2].i]", set(int32(1), int32(2)), false},
		{`m[{"a":"d[1].l"}]`, map[any]any{"a": int64(1)}, true},
		{`m[{"a":"d[1].l"}]`, map[any]any{"a": int32(1)}, false},
		{`m[{"a":1}]`, map[any]any{"a": int32(1)}, true}, // a bare JSON number names no type
	} {
		if got := same(parse(c.exp), c.act); got != c.same {
			t.Errorf("same(%s, %T %v) = %v, want %v", c.exp, c.act, c.act, got, c.same)
		}
	}

	// Widening only where the scenario's Gremlin has such literals.
	if l := literalWidening(`g.V().values("age").sum()`); l.ints || l.floats {
		t.Errorf("no literals: %+v", l)
	}
	if l := literalWidening(`g.V().has("name", "v1").values("x")`); l.ints {
		t.Errorf("digits inside a string are no literal: %+v", l)
	}
	l := literalWidening(`g.inject(1i).fold(0, Operator.sum).is(0.5f)`)
	if !l.ints || !l.floats {
		t.Errorf("literals missed: %+v", l)
	}
	if !same(widenExpected(parse("d[1].i"), l), int64(1)) || same(widenExpected(parse("d[1].l"), l), int32(1)) {
		t.Error("widening: an expected Integer may come back as a Long, never an expected Long as an Integer")
	}
}
