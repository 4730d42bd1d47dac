package traversal

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"sort"
	"strconv"
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
	case int, int8, int16, int32, int64, uint8, float32, float64, *big.Int, *gb.BigDecimal:
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
	case *gb.BigDecimal:
		if n.Unscaled == nil {
			return 0, true
		}
		f, _ := new(big.Float).SetInt(n.Unscaled).Float64()
		return f / math.Pow10(int(n.Scale)), true
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
	if a == nil || b == nil {
		// Comparability: null is comparable only with null (and equal to it).
		return 0, a == nil && b == nil
	}
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

// Orderability type ranks (TinkerPop's GremlinValueComparator.Type): values of
// different types order by type, in this sequence.
const (
	rankNull = iota
	rankBool
	rankNumber
	rankDate
	rankString
	rankUUID
	rankVertex
	rankEdge
	rankVertexProperty
	rankProperty
	rankPath
	rankSet
	rankList
	rankMap
	rankMapEntry
	rankUnknown
)

// typeRank gives a total order across types for order().
func typeRank(v any) int {
	switch v.(type) {
	case nil:
		return rankNull
	case bool:
		return rankBool
	case int, int8, int16, int32, int64, uint8, float32, float64, *big.Int, *gb.BigDecimal:
		return rankNumber
	case time.Time:
		return rankDate
	case string:
		return rankString
	case uuid.UUID:
		return rankUUID
	case *graph.Vertex:
		return rankVertex
	case *graph.Edge:
		return rankEdge
	case *graph.VertexProperty:
		return rankVertexProperty
	case *graph.Property:
		return rankProperty
	case *pathValue:
		return rankPath
	case *gb.Set:
		return rankSet
	case []any:
		return rankList
	case *gb.Map:
		return rankMap
	case mapEntry:
		return rankMapEntry
	}
	return rankUnknown
}

// orderCompare is TinkerPop's orderability: a total, deterministic order
// across all values (nulls first, then by type rank; elements by id;
// properties by key then value; paths and lists element by element; sets and
// maps by their sorted members; unknown types by type name then a
// deterministic rendering — never by memory address).
func orderCompare(a, b any) int {
	// Tokens (T.id, T.label, ... as map keys) order by their names.
	if e, ok := a.(gb.Enum); ok {
		a = e.Name
	}
	if e, ok := b.(gb.Enum); ok {
		b = e.Name
	}
	ra, rb := typeRank(a), typeRank(b)
	if ra != rb {
		return ra - rb
	}
	switch ra {
	case rankNull:
		return 0
	case rankNumber:
		return cmpNum(a, b)
	case rankBool, rankDate, rankString:
		c, _ := compare(a, b)
		return c
	case rankUUID:
		x, y := a.(uuid.UUID), b.(uuid.UUID)
		// java.util.UUID.compareTo: signed most significant then least significant halves.
		for _, half := range [2][2]int{{0, 8}, {8, 16}} {
			var hx, hy int64
			for i := half[0]; i < half[1]; i++ {
				hx = hx<<8 | int64(x[i])
				hy = hy<<8 | int64(y[i])
			}
			if hx != hy {
				if hx < hy {
					return -1
				}
				return 1
			}
		}
		return 0
	case rankVertex:
		return orderCompare(a.(*graph.Vertex).ID, b.(*graph.Vertex).ID)
	case rankEdge:
		return orderCompare(a.(*graph.Edge).ID, b.(*graph.Edge).ID)
	case rankVertexProperty:
		return orderCompare(a.(*graph.VertexProperty).ID, b.(*graph.VertexProperty).ID)
	case rankProperty:
		x, y := a.(*graph.Property), b.(*graph.Property)
		if c := strings.Compare(x.Key, y.Key); c != 0 {
			return c
		}
		return orderCompare(x.Value, y.Value)
	case rankPath:
		return compareSeq(a.(*pathValue).objs, b.(*pathValue).objs)
	case rankList:
		return compareSeq(a.([]any), b.([]any))
	case rankSet:
		return compareSeq(sortedCopy(a.(*gb.Set).Items), sortedCopy(b.(*gb.Set).Items))
	case rankMap:
		return compareSeq(sortedEntries(a.(*gb.Map)), sortedEntries(b.(*gb.Map)))
	case rankMapEntry:
		x, y := a.(mapEntry), b.(mapEntry)
		if c := orderCompare(x.k, y.k); c != 0 {
			return c
		}
		return orderCompare(x.v, y.v)
	}
	ta, tb := fmt.Sprintf("%T", a), fmt.Sprintf("%T", b)
	if ta != tb {
		return strings.Compare(ta, tb)
	}
	var sa, sb strings.Builder
	canonStr(&sa, a)
	canonStr(&sb, b)
	return strings.Compare(sa.String(), sb.String())
}

func compareSeq(x, y []any) int {
	for i := 0; i < len(x) && i < len(y); i++ {
		if c := orderCompare(x[i], y[i]); c != 0 {
			return c
		}
	}
	return len(x) - len(y)
}

func sortedCopy(items []any) []any {
	c := append([]any(nil), items...)
	sort.SliceStable(c, func(i, j int) bool { return orderCompare(c[i], c[j]) < 0 })
	return c
}

func sortedEntries(m *gb.Map) []any {
	es := make([]any, len(m.Entries))
	for i, e := range m.Entries {
		es[i] = mapEntry{e.Key, e.Value}
	}
	return sortedCopy(es)
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
	case *graph.Vertex:
		// A vertex sent by the client (a reference) equals the graph's vertex.
		if y, ok := b.(*gb.Vertex); ok {
			return equal(x.ID, y.ID)
		}
		return a == b
	case *gb.Vertex:
		if y, ok := b.(*graph.Vertex); ok {
			return equal(x.ID, y.ID)
		}
	case *graph.Edge, *graph.VertexProperty:
		return a == b
	case *graph.Property:
		// TinkerPop: properties are equal when their keys and values are.
		y, ok := b.(*graph.Property)
		return ok && x.Key == y.Key && equal(x.Value, y.Value)
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
			k string
			v any
		}{x.Key, canon(x.Value)}
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
		sb.WriteString("v[")
		canonStr(sb, x.ID)
		sb.WriteString("]")
	case *graph.Edge:
		sb.WriteString("e[")
		canonStr(sb, x.ID)
		sb.WriteString("]")
	case *graph.VertexProperty:
		fmt.Fprintf(sb, "vp[%d]", x.ID)
	case *graph.Property:
		sb.WriteString("p[")
		if x.VP != nil {
			canonStr(sb, x.VP)
		} else {
			canonStr(sb, x.Edge)
		}
		sb.WriteString("." + x.Key + "]")
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
					w.Properties = append(w.Properties, wireVP(vp, o))
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
		return wireVP(x, o)
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

// gremlinString renders a value the way TinkerPop's reference implementation
// does (StringFactory and java.lang toString): v[1], e[7][1-knows->2],
// vp[name->marko], p[weight->0.5], path[v[1], v[2]], [a, b], {k=v}, 1.0.
// It never shows a Go struct or a pointer.
func gremlinString(v any) string {
	var sb strings.Builder
	writeGremlinString(&sb, v)
	return sb.String()
}

func writeGremlinString(sb *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		sb.WriteString("null")
	case string:
		sb.WriteString(x)
	case bool:
		if x {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case float64:
		sb.WriteString(javaDouble(x, 64))
	case float32:
		sb.WriteString(javaDouble(float64(x), 32))
	case int, int8, int16, int32, int64, uint8:
		fmt.Fprintf(sb, "%d", x)
	case *big.Int:
		sb.WriteString(x.String())
	case *gb.BigDecimal:
		sb.WriteString(bigDecimalString(x))
	case uuid.UUID:
		sb.WriteString(x.String())
	case time.Time:
		sb.WriteString(x.UTC().Format(time.RFC3339Nano))
	case *graph.Vertex:
		sb.WriteString("v[")
		writeGremlinString(sb, x.ID)
		sb.WriteString("]")
	case *graph.Edge:
		sb.WriteString("e[")
		writeGremlinString(sb, x.ID)
		sb.WriteString("][")
		writeGremlinString(sb, x.Out.ID)
		sb.WriteString("-" + x.Label + "->")
		writeGremlinString(sb, x.In.ID)
		sb.WriteString("]")
	case *graph.VertexProperty:
		sb.WriteString("vp[" + x.Key + "->" + abbreviate(gremlinString(x.Value), 20) + "]")
	case *graph.Property:
		sb.WriteString("p[" + x.Key + "->" + abbreviate(gremlinString(x.Value), 20) + "]")
	case *pathValue:
		sb.WriteString("path[")
		writeJoined(sb, x.objs)
		sb.WriteString("]")
	case []any:
		sb.WriteString("[")
		writeJoined(sb, x)
		sb.WriteString("]")
	case *gb.Set:
		sb.WriteString("[")
		writeJoined(sb, x.Items)
		sb.WriteString("]")
	case *gb.Map:
		sb.WriteString("{")
		for i, e := range x.Entries {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeGremlinString(sb, e.Key)
			sb.WriteString("=")
			writeGremlinString(sb, e.Value)
		}
		sb.WriteString("}")
	case mapEntry:
		writeGremlinString(sb, x.k)
		sb.WriteString("=")
		writeGremlinString(sb, x.v)
	case gb.Enum:
		sb.WriteString(x.Name)
	default:
		fmt.Fprintf(sb, "%v", v)
	}
}

func writeJoined(sb *strings.Builder, items []any) {
	for i, e := range items {
		if i > 0 {
			sb.WriteString(", ")
		}
		writeGremlinString(sb, e)
	}
}

func abbreviate(s string, max int) string {
	if r := []rune(s); len(r) > max {
		return string(r[:max-3]) + "..."
	}
	return s
}

// javaDouble formats like java.lang.Double/Float.toString.
func javaDouble(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	a := math.Abs(f)
	if f == 0 || (a >= 1e-3 && a < 1e7) {
		s := strconv.FormatFloat(f, 'f', -1, bits)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'E', -1, bits) // 1.5E+07
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

func bigDecimalString(d *gb.BigDecimal) string {
	if d.Unscaled == nil {
		return "0"
	}
	s := d.Unscaled.String()
	if d.Scale <= 0 {
		return s + strings.Repeat("0", int(-d.Scale))
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for len(s) <= int(d.Scale) {
		s = "0" + s
	}
	s = s[:len(s)-int(d.Scale)] + "." + s[len(s)-int(d.Scale):]
	if neg {
		s = "-" + s
	}
	return s
}

// wireVP is a vertex property with its meta-properties (unless tokens only).
func wireVP(vp *graph.VertexProperty, o wireOpts) *gb.VertexProperty {
	w := &gb.VertexProperty{ID: vp.ID, Label: vp.Key, Value: toWire(vp.Value, o)}
	if !o.tokensOnly && len(vp.MetaKeys()) > 0 {
		for _, k := range vp.MetaKeys() {
			v, _ := vp.Meta(k)
			w.Properties = append(w.Properties, &gb.Property{Key: k, Value: toWire(v, o)})
		}
	}
	return w
}

// arith is Operator.sum/minus/mult/div on two numbers: NumberHelper's
// add/sub/mul/div in the operands' common class (see numbers.go); integral
// division truncates and by zero is an error.
func arith(op string, a, b any) (any, error) {
	sym, ok := map[string]string{"sum": "+", "minus": "-", "mult": "*", "div": "/"}[op]
	if !ok {
		return nil, evalErr("unknown operator %s", op)
	}
	return numOp(sym, a, b, false)
}
