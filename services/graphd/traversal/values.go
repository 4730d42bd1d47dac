package traversal

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// mapEntry is a Map.Entry produced by unfolding a map.
type mapEntry struct{ k, v any }

// pathValue is a materialised path.
type pathValue struct {
	labels [][]string
	objs   []any
}

func isNumber(v any) bool {
	switch v.(type) {
	case int, int8, int16, int32, int64, uint8, float32, float64, *big.Int:
		return true
	}
	return false
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint8:
		return float64(n), true
	case float32:
		return float64(n), true
	case float64:
		return n, true
	case *big.Int:
		f, _ := new(big.Float).SetInt(n).Float64()
		return f, true
	}
	return 0, false
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	}
	return 0, false
}

// cmpNum compares two numbers.
func cmpNum(a, b any) int {
	ia, oka := toInt64(a)
	ib, okb := toInt64(b)
	if oka && okb {
		switch {
		case ia < ib:
			return -1
		case ia > ib:
			return 1
		}
		return 0
	}
	fa, _ := toFloat(a)
	fb, _ := toFloat(b)
	switch {
	case fa < fb:
		return -1
	case fa > fb:
		return 1
	case fa == fb:
		return 0
	}
	// NaN: order NaN last
	if fa != fa && fb != fb {
		return 0
	}
	if fa != fa {
		return 1
	}
	return -1
}

// compare returns the order of a and b when they are mutually comparable.
func compare(a, b any) (int, bool) {
	if isNumber(a) && isNumber(b) {
		fa, _ := toFloat(a)
		fb, _ := toFloat(b)
		if fa != fa || fb != fb {
			return 0, false
		}
		return cmpNum(a, b), true
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	case bool:
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0, true
			case !x:
				return -1, true
			}
			return 1, true
		}
	case time.Time:
		if y, ok := b.(time.Time); ok {
			return x.Compare(y), true
		}
	case time.Duration:
		if y, ok := b.(time.Duration); ok {
			switch {
			case x < y:
				return -1, true
			case x > y:
				return 1, true
			}
			return 0, true
		}
	case uuid.UUID:
		if y, ok := b.(uuid.UUID); ok {
			return strings.Compare(x.String(), y.String()), true
		}
	}
	return 0, false
}

// typeRank gives a total order across types for order().
func typeRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case int, int8, int16, int32, int64, uint8, float32, float64, *big.Int:
		return 2
	case time.Time:
		return 3
	case string:
		return 4
	case uuid.UUID:
		return 5
	}
	return 9
}

// orderCompare is a total order used for sorting.
func orderCompare(a, b any) int {
	if c, ok := compare(a, b); ok {
		return c
	}
	if isNumber(a) && isNumber(b) {
		return cmpNum(a, b)
	}
	ra, rb := typeRank(a), typeRank(b)
	if ra != rb {
		return ra - rb
	}
	if ra == 0 {
		return 0
	}
	switch x := a.(type) {
	case *graph.Vertex:
		if y, ok := b.(*graph.Vertex); ok {
			return orderCompare(x.ID, y.ID)
		}
	case *graph.Edge:
		if y, ok := b.(*graph.Edge); ok {
			return orderCompare(x.ID, y.ID)
		}
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

// equal is Gremlin equality: numbers by value, elements by identity.
func equal(a, b any) bool {
	if isNumber(a) && isNumber(b) {
		fa, _ := toFloat(a)
		fb, _ := toFloat(b)
		if fa != fa || fb != fb {
			return false
		}
		return cmpNum(a, b) == 0
	}
	switch x := a.(type) {
	case *graph.Vertex, *graph.Edge, *graph.VertexProperty:
		return a == b
	case *graph.Property:
		y, ok := b.(*graph.Property)
		return ok && x.Edge == y.Edge && x.Key == y.Key
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case mapEntry:
		y, ok := b.(mapEntry)
		return ok && equal(x.k, y.k) && equal(x.v, y.v)
	case *pathValue:
		y, ok := b.(*pathValue)
		return ok && equal(x.objs, y.objs)
	}
	return gb.Equal(a, b)
}

// canon returns a comparable key such that equal(a,b) implies canon(a)==canon(b).
func canon(v any) any {
	switch x := v.(type) {
	case *graph.Vertex, *graph.Edge, *graph.VertexProperty:
		return x
	case *graph.Property:
		return struct {
			e *graph.Edge
			k string
		}{x.Edge, x.Key}
	case nil:
		return nil
	}
	if k, ok := graph.IndexKey(v); ok {
		return k
	}
	var sb strings.Builder
	canonStr(&sb, v)
	return "\x00" + sb.String()
}

func canonStr(sb *strings.Builder, v any) {
	switch x := v.(type) {
	case []any:
		sb.WriteString("[")
		for _, e := range x {
			canonStr(sb, e)
			sb.WriteString(",")
		}
		sb.WriteString("]")
	case *gb.Set:
		keys := make([]string, 0, len(x.Items))
		for _, e := range x.Items {
			var s strings.Builder
			canonStr(&s, e)
			keys = append(keys, s.String())
		}
		sort.Strings(keys)
		sb.WriteString("{" + strings.Join(keys, ",") + "}")
	case *gb.Map:
		keys := make([]string, 0, len(x.Entries))
		for _, e := range x.Entries {
			var s strings.Builder
			canonStr(&s, e.Key)
			s.WriteString("=")
			canonStr(&s, e.Value)
			keys = append(keys, s.String())
		}
		sort.Strings(keys)
		sb.WriteString("<" + strings.Join(keys, ",") + ">")
	case mapEntry:
		canonStr(sb, x.k)
		sb.WriteString("=")
		canonStr(sb, x.v)
	case *pathValue:
		canonStr(sb, x.objs)
	case *graph.Vertex:
		fmt.Fprintf(sb, "v[%p]", x)
	case *graph.Edge:
		fmt.Fprintf(sb, "e[%p]", x)
	case *graph.VertexProperty:
		fmt.Fprintf(sb, "vp[%p]", x)
	default:
		if k, ok := graph.IndexKey(v); ok {
			fmt.Fprintf(sb, "%T:%v", k, k)
		} else {
			fmt.Fprintf(sb, "%T:%v", v, v)
		}
	}
}

// ---- predicates ----

type pred func(v any) bool

func buildPred(a any) (pred, error) {
	p, ok := a.(*gb.P)
	if !ok {
		return func(v any) bool { return equal(v, a) }, nil
	}
	return buildP(p)
}

func flattenValues(vals []any) []any {
	if len(vals) == 1 {
		switch l := vals[0].(type) {
		case []any:
			return l
		case *gb.Set:
			return l.Items
		}
	}
	return vals
}

func buildP(p *gb.P) (pred, error) {
	arg := func(i int) any {
		if i < len(p.Values) {
			return p.Values[i]
		}
		return nil
	}
	cmpP := func(test func(int) bool) pred {
		ref := arg(0)
		return func(v any) bool {
			c, ok := compare(v, ref)
			return ok && test(c)
		}
	}
	if p.Text {
		s, _ := arg(0).(string)
		strTest := func(f func(string) bool) pred {
			return func(v any) bool {
				x, ok := v.(string)
				return ok && f(x)
			}
		}
		switch p.Op {
		case "containing":
			return strTest(func(x string) bool { return strings.Contains(x, s) }), nil
		case "notContaining":
			return strTest(func(x string) bool { return !strings.Contains(x, s) }), nil
		case "startingWith":
			return strTest(func(x string) bool { return strings.HasPrefix(x, s) }), nil
		case "notStartingWith":
			return strTest(func(x string) bool { return !strings.HasPrefix(x, s) }), nil
		case "endingWith":
			return strTest(func(x string) bool { return strings.HasSuffix(x, s) }), nil
		case "notEndingWith":
			return strTest(func(x string) bool { return !strings.HasSuffix(x, s) }), nil
		case "regex", "notRegex":
			re, err := regexp.Compile(s)
			if err != nil {
				return nil, fmt.Errorf("TextP.%s: %v", p.Op, err)
			}
			neg := p.Op == "notRegex"
			return strTest(func(x string) bool { return re.MatchString(x) != neg }), nil
		}
	}
	switch p.Op {
	case "eq":
		ref := arg(0)
		return func(v any) bool { return equal(v, ref) }, nil
	case "neq":
		ref := arg(0)
		return func(v any) bool { return !equal(v, ref) }, nil
	case "lt":
		return cmpP(func(c int) bool { return c < 0 }), nil
	case "lte":
		return cmpP(func(c int) bool { return c <= 0 }), nil
	case "gt":
		return cmpP(func(c int) bool { return c > 0 }), nil
	case "gte":
		return cmpP(func(c int) bool { return c >= 0 }), nil
	case "inside", "outside", "between":
		lo, hi := arg(0), arg(1)
		op := p.Op
		return func(v any) bool {
			c1, ok1 := compare(v, lo)
			c2, ok2 := compare(v, hi)
			if !ok1 || !ok2 {
				return false
			}
			switch op {
			case "inside":
				return c1 > 0 && c2 < 0
			case "outside":
				return c1 < 0 || c2 > 0
			}
			return c1 >= 0 && c2 < 0
		}, nil
	case "within", "without":
		vals := flattenValues(p.Values)
		neg := p.Op == "without"
		set := map[any]bool{}
		var slow []any
		for _, x := range vals {
			if k, ok := graph.IndexKey(x); ok {
				set[k] = true
			} else {
				slow = append(slow, x)
			}
		}
		return func(v any) bool {
			found := false
			if k, ok := graph.IndexKey(v); ok && set[k] {
				found = true
			} else {
				for _, x := range slow {
					if equal(v, x) {
						found = true
						break
					}
				}
			}
			return found != neg
		}, nil
	case "not":
		inner, err := buildPred(arg(0))
		if err != nil {
			return nil, err
		}
		return func(v any) bool { return !inner(v) }, nil
	case "and", "or":
		var ps []pred
		for _, x := range p.Values {
			q, err := buildPred(x)
			if err != nil {
				return nil, err
			}
			ps = append(ps, q)
		}
		and := p.Op == "and"
		return func(v any) bool {
			for _, q := range ps {
				if q(v) != and {
					return !and
				}
			}
			return and
		}, nil
	}
	kind := "P"
	if p.Text {
		kind = "TextP"
	}
	return nil, fmt.Errorf("predicate %s.%s is not supported by graphd", kind, p.Op)
}

// ---- arithmetic ----

func add(a, b any) any {
	if a == nil {
		return b
	}
	ia, oka := a.(int32)
	ib, okb := b.(int32)
	if oka && okb {
		s := int64(ia) + int64(ib)
		if s > math.MaxInt32 || s < math.MinInt32 {
			return s
		}
		return int32(s)
	}
	la, oka := toInt64(a)
	lb, okb := toInt64(b)
	if oka && okb {
		return la + lb
	}
	fa, _ := toFloat(a)
	fb, _ := toFloat(b)
	return fa + fb
}

// ---- conversion to wire values ----

type wireOpts struct {
	tokensOnly bool
}

func toWire(v any, o wireOpts) any {
	switch x := v.(type) {
	case *graph.Vertex:
		w := &gb.Vertex{ID: x.ID, Label: x.Label}
		if !o.tokensOnly {
			w.Properties = []any{}
			for _, k := range x.Keys() {
				for _, vp := range x.Properties(k) {
					w.Properties = append(w.Properties, &gb.VertexProperty{ID: vp.ID, Label: vp.Key, Value: toWire(vp.Value, o)})
				}
			}
		}
		return w
	case *graph.Edge:
		w := &gb.Edge{ID: x.ID, Label: x.Label, InID: x.In.ID, InLabel: x.In.Label, OutID: x.Out.ID, OutLabel: x.Out.Label}
		if !o.tokensOnly {
			w.Properties = []any{}
			for _, k := range x.Keys() {
				val, _ := x.Property(k)
				w.Properties = append(w.Properties, &gb.Property{Key: k, Value: toWire(val, o)})
			}
		}
		return w
	case *graph.VertexProperty:
		return &gb.VertexProperty{ID: x.ID, Label: x.Key, Value: toWire(x.Value, o)}
	case *graph.Property:
		return &gb.Property{Key: x.Key, Value: toWire(x.Value, o)}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toWire(e, o)
		}
		return out
	case *gb.Set:
		out := make([]any, len(x.Items))
		for i, e := range x.Items {
			out[i] = toWire(e, o)
		}
		return &gb.Set{Items: out}
	case *gb.Map:
		m := &gb.Map{Entries: make([]gb.MapEntry, len(x.Entries))}
		for i, e := range x.Entries {
			m.Entries[i] = gb.MapEntry{Key: toWire(e.Key, o), Value: toWire(e.Value, o)}
		}
		return m
	case mapEntry:
		return &gb.Map{Entries: []gb.MapEntry{{Key: toWire(x.k, o), Value: toWire(x.v, o)}}}
	case *pathValue:
		objs := make([]any, len(x.objs))
		for i, e := range x.objs {
			objs[i] = toWire(e, o)
		}
		labels := x.labels
		if labels == nil {
			labels = make([][]string, len(objs))
		}
		return &gb.Path{Labels: labels, Objects: objs}
	}
	return v
}

// ToWire converts interpreter values (graph elements, paths, entries) into
// GraphBinary-writable values. includeProperties=false sends references only.
func ToWire(v any, includeProperties bool) any {
	return toWire(v, wireOpts{tokensOnly: !includeProperties})
}
