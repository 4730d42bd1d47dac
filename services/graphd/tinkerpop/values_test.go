package tinkerpop_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/google/uuid"
)

// TinkerPop's result notation (feature files): v[name], v[name].id, v[name].sid,
// e[out-label->in], e[...].id, e[...].sid, vp[name-key->value], p[a,b], l[a,b],
// s[a,b], m[{json}], d[1].i/.l/.d/.f/.s/.b/.m/.n, d[NaN], dt[RFC3339],
// str[...], t[label], D[OUT], M[onCreate], c[lambda], null, true, false.
//
// parseValue turns a notation string into either a parameter (gremlin-go
// values sent to the server) or an expected value (the matcher's own types
// below, compared by TinkerPop's equality: elements by id, numbers by value).

type vref struct{ id any }
type eref struct{ id any }
type vpref struct {
	key   string
	value any
}
type pathExp []any
type setExp []any
type mapExp []kvExp
type kvExp struct{ k, v any }

var errLambda = errors.New("lambda parameter")

// names resolves element names of one graph.
type names struct {
	vertices map[string]*gremlingo.Vertex
	edges    map[string]*gremlingo.Edge
}

func (n *names) vertex(name string) (*gremlingo.Vertex, error) {
	if v, ok := n.vertices[name]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("no vertex named %q in the graph", name)
}

func (n *names) edge(key string) (*gremlingo.Edge, error) {
	if e, ok := n.edges[key]; ok {
		return e, nil
	}
	return nil, fmt.Errorf("no edge %q in the graph", key)
}

var numRe = regexp.MustCompile(`^d\[(.*)\]\.([bslfdmni])$`)

func splitTop(s string) []string {
	// Splits on commas outside brackets/braces.
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func inner(s, prefix string) (string, bool) {
	if strings.HasPrefix(s, prefix+"[") && strings.HasSuffix(s, "]") {
		return s[len(prefix)+1 : len(s)-1], true
	}
	return "", false
}

// parseValue parses one notation string. param selects gremlin-go parameter
// values instead of expected values.
func parseValue(s string, n *names, param bool) (any, error) {
	switch s {
	case "null":
		return nil, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "d[NaN]":
		return math.NaN(), nil
	case "d[Infinity]":
		return math.Inf(1), nil
	case "d[-Infinity]":
		return math.Inf(-1), nil
	}
	if m := numRe.FindStringSubmatch(s); m != nil {
		v, err := parseNumber(m[1], m[2])
		if b, ok := v.(int8); ok && param {
			// gremlin-go sends a Go byte (uint8) as a Java Byte, an int8 as
			// a Short.
			return uint8(b), err
		}
		return v, err
	}
	if x, ok := inner(s, "str"); ok {
		return x, nil
	}
	if x, ok := inner(s, "dt"); ok {
		return time.Parse(time.RFC3339, x)
	}
	if strings.HasPrefix(s, "v[") {
		switch {
		case strings.HasSuffix(s, "].id"):
			v, err := n.vertex(s[2 : len(s)-4])
			if err != nil {
				return nil, err
			}
			return v.Id, nil
		case strings.HasSuffix(s, "].sid"):
			v, err := n.vertex(s[2 : len(s)-5])
			if err != nil {
				return nil, err
			}
			return fmt.Sprint(v.Id), nil
		}
		name, _ := inner(s, "v")
		v, err := n.vertex(name)
		if err != nil {
			if param {
				return nil, err
			}
			return vref{id: name}, nil
		}
		if param {
			return v, nil
		}
		return vref{id: v.Id}, nil
	}
	if strings.HasPrefix(s, "e[") {
		switch {
		case strings.HasSuffix(s, "].id"):
			e, err := n.edge(s[2 : len(s)-4])
			if err != nil {
				return nil, err
			}
			return e.Id, nil
		case strings.HasSuffix(s, "].sid"):
			e, err := n.edge(s[2 : len(s)-5])
			if err != nil {
				return nil, err
			}
			return fmt.Sprint(e.Id), nil
		}
		key, _ := inner(s, "e")
		e, err := n.edge(key)
		if err != nil {
			return nil, err
		}
		if param {
			return e, nil
		}
		return eref{id: e.Id}, nil
	}
	if x, ok := inner(s, "vp"); ok {
		// name-key->value
		dash := strings.Index(x, "-")
		arrow := strings.Index(x, "->")
		if dash < 0 || arrow < dash {
			return nil, fmt.Errorf("bad vertex property %q", s)
		}
		key := x[dash+1 : arrow]
		val, err := parseValue(x[arrow+2:], n, param)
		if err != nil {
			return nil, err
		}
		if param {
			return nil, fmt.Errorf("vertex property parameters are not supported by the harness")
		}
		return vpref{key: key, value: val}, nil
	}
	if x, ok := inner(s, "p"); ok {
		var objs pathExp
		for _, part := range splitTop(x) {
			v, err := parseValue(part, n, param)
			if err != nil {
				return nil, err
			}
			objs = append(objs, v)
		}
		return objs, nil
	}
	if x, ok := inner(s, "l"); ok {
		list := []any{}
		if x != "" {
			for _, part := range splitTop(x) {
				v, err := parseValue(part, n, param)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
		}
		return list, nil
	}
	if x, ok := inner(s, "s"); ok {
		set := setExp{}
		if x != "" {
			for _, part := range splitTop(x) {
				v, err := parseValue(part, n, param)
				if err != nil {
					return nil, err
				}
				set = append(set, v)
			}
		}
		if param {
			ss := gremlingo.NewSimpleSet()
			for _, v := range set {
				ss.Add(v)
			}
			return ss, nil
		}
		return set, nil
	}
	if x, ok := inner(s, "m"); ok {
		var raw any
		d := json.NewDecoder(strings.NewReader(x))
		d.UseNumber()
		if err := d.Decode(&raw); err != nil {
			return nil, fmt.Errorf("bad map %q: %w", s, err)
		}
		return jsonValue(raw, n, param)
	}
	if _, ok := inner(s, "c"); ok {
		return nil, errLambda
	}
	if x, ok := inner(s, "t"); ok {
		if param {
			switch x {
			case "id":
				return gremlingo.T.Id, nil
			case "label":
				return gremlingo.T.Label, nil
			case "key":
				return gremlingo.T.Key, nil
			case "value":
				return gremlingo.T.Value, nil
			}
		}
		return x, nil
	}
	if x, ok := inner(s, "D"); ok {
		if param {
			switch x {
			case "OUT":
				return gremlingo.Direction.Out, nil
			case "IN":
				return gremlingo.Direction.In, nil
			case "BOTH":
				return gremlingo.Direction.Both, nil
			case "from":
				return gremlingo.Direction.From, nil
			case "to":
				return gremlingo.Direction.To, nil
			}
		}
		return x, nil
	}
	if x, ok := inner(s, "M"); ok {
		if param {
			switch x {
			case "onCreate":
				return gremlingo.Merge.OnCreate, nil
			case "onMatch":
				return gremlingo.Merge.OnMatch, nil
			case "outV":
				return gremlingo.Merge.OutV, nil
			case "inV":
				return gremlingo.Merge.InV, nil
			}
		}
		return x, nil
	}
	return s, nil
}

func jsonValue(raw any, n *names, param bool) (any, error) {
	switch x := raw.(type) {
	case string:
		return parseValue(x, n, param)
	case json.Number:
		// A bare JSON number names no type (TinkerPop's runners compare it
		// by value); a typed one is written "d[1].l" inside the JSON.
		var v any
		if i, err := x.Int64(); err == nil {
			v = i
		} else if f, err := x.Float64(); err == nil {
			v = f
		} else {
			return nil, err
		}
		if param {
			return v, nil
		}
		return untypedNum{v}, nil
	case []any:
		out := []any{}
		for _, e := range x {
			v, err := jsonValue(e, n, param)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if param {
			m := map[any]any{}
			for _, k := range keys {
				kv, err := parseValue(k, n, true)
				if err != nil {
					return nil, err
				}
				vv, err := jsonValue(x[k], n, true)
				if err != nil {
					return nil, err
				}
				m[kv] = vv
			}
			return m, nil
		}
		var m mapExp
		for _, k := range keys {
			kv, err := parseValue(k, n, false)
			if err != nil {
				return nil, err
			}
			vv, err := jsonValue(x[k], n, false)
			if err != nil {
				return nil, err
			}
			m = append(m, kvExp{kv, vv})
		}
		return m, nil
	case nil, bool:
		return x, nil
	}
	return nil, fmt.Errorf("unexpected JSON value %T", raw)
}

func parseNumber(s, suffix string) (any, error) {
	switch suffix {
	case "i":
		n, err := strconv.ParseInt(s, 10, 32)
		return int32(n), err
	case "l":
		return strconv.ParseInt(s, 10, 64)
	case "s":
		n, err := strconv.ParseInt(s, 10, 16)
		return int16(n), err
	case "b":
		n, err := strconv.ParseInt(s, 10, 8)
		return int8(n), err
	case "d":
		return strconv.ParseFloat(s, 64)
	case "f":
		f, err := strconv.ParseFloat(s, 32)
		return float32(f), err
	case "n":
		b, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("bad BigInteger %q", s)
		}
		return b, nil
	case "m":
		digits, scale := s, 0
		if i := strings.Index(s, "."); i >= 0 {
			digits, scale = s[:i]+s[i+1:], len(s)-i-1
		}
		u, ok := new(big.Int).SetString(digits, 10)
		if !ok {
			return nil, fmt.Errorf("bad BigDecimal %q", s)
		}
		return &gremlingo.BigDecimal{Scale: int32(scale), UnscaledValue: *u}, nil
	}
	return nil, fmt.Errorf("bad number suffix %q", suffix)
}

// ---- matching ----

type numKind int

const (
	notNum numKind = iota
	intNum
	floatNum
	bigNum
)

func numOf(v any) (numKind, int64, float64, *big.Float) {
	switch x := v.(type) {
	case int8:
		return intNum, int64(x), float64(x), nil
	case int16:
		return intNum, int64(x), float64(x), nil
	case int32:
		return intNum, int64(x), float64(x), nil
	case int64:
		return intNum, x, float64(x), nil
	case int:
		return intNum, int64(x), float64(x), nil
	case uint8:
		return intNum, int64(x), float64(x), nil
	case float32:
		return floatNum, 0, float64(x), nil
	case float64:
		return floatNum, 0, x, nil
	case *big.Int:
		f := new(big.Float).SetInt(x)
		fv, _ := f.Float64()
		return bigNum, 0, fv, f
	case *gremlingo.BigDecimal:
		f := new(big.Float).SetPrec(256).SetInt(&x.UnscaledValue)
		if x.Scale > 0 {
			f.Quo(f, new(big.Float).SetPrec(256).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(x.Scale)), nil)))
		}
		fv, _ := f.Float64()
		return bigNum, 0, fv, f
	case gremlingo.BigDecimal:
		return numOf(&x)
	}
	return notNum, 0, 0, nil
}

func sameID(a, b any) bool {
	ka, ia, _, _ := numOf(a)
	kb, ib, _, _ := numOf(b)
	if ka == intNum && kb == intNum {
		return ia == ib
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// widened is an expected Integer, Short or Byte (Float) that may arrive as
// a Long (Double) of the same value, because the scenario's gremlin-go
// translation wrote the Gremlin's typed literals (1i, 2s, 0.5f, and plain
// 1, which is an Integer in Java) as untyped Go constants, which gremlin-go
// sends as Long (Double): graphd then computes with the Long it was given.
type widened struct{ v any }

var (
	stringLit = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	intLit    = regexp.MustCompile(`(^|[^\w.])\d+[iIsSbB]?($|[^\w.])`)
	floatLit  = regexp.MustCompile(`(^|[^\w.])\d+(\.\d+)?[fF]($|[^\w.])`)
)

// literals reports which of a scenario's Gremlin literals gremlin-go's
// translation widens: integer literals (to Long), float literals (to
// Double).
type literals struct{ ints, floats bool }

func literalWidening(gremlin string) literals {
	code := stringLit.ReplaceAllString(gremlin, `""`)
	return literals{ints: intLit.MatchString(code), floats: floatLit.MatchString(code)}
}

// widenExpected marks the expected numbers that gremlin-go's translation
// may have widened (see widened); everything else stays exact.
func widenExpected(v any, l literals) any {
	if !l.ints && !l.floats {
		return v
	}
	switch x := v.(type) {
	case int32, int16, int8:
		if l.ints {
			return widened{x}
		}
	case float32:
		if l.floats {
			return widened{x}
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = widenExpected(e, l)
		}
		return out
	case setExp:
		out := make(setExp, len(x))
		for i, e := range x {
			out[i] = widenExpected(e, l)
		}
		return out
	case pathExp:
		out := make(pathExp, len(x))
		for i, e := range x {
			out[i] = widenExpected(e, l)
		}
		return out
	case mapExp:
		out := make(mapExp, len(x))
		for i, kv := range x {
			out[i] = kvExp{widenExpected(kv.k, l), widenExpected(kv.v, l)}
		}
		return out
	case vpref:
		return vpref{key: x.key, value: widenExpected(x.value, l)}
	}
	return v
}

// untypedNum is a number whose notation names no type (a bare JSON number in
// m[...]): it matches any numeric type of equal value.
type untypedNum struct{ v any }

// javaNumType names the Java type a number in the result notation stands
// for (d[1].i Integer, .l Long, .d Double, .f Float, .s Short, .b Byte, .n
// BigInteger, .m BigDecimal), as gremlin-go decodes it.
func javaNumType(v any) string {
	switch v.(type) {
	case int32:
		return "Integer"
	case int64:
		return "Long"
	case float64:
		return "Double"
	case float32:
		return "Float"
	case int16:
		return "Short"
	case int8, uint8:
		return "Byte"
	case *big.Int:
		return "BigInteger"
	case *gremlingo.BigDecimal, gremlingo.BigDecimal:
		return "BigDecimal"
	}
	return ""
}

// same reports whether actual (as gremlin-go decoded it) equals expected.
// Numbers compare by type and value (a Long where an Integer is expected is
// a wrong answer), sets only with sets and lists only with lists, as
// TinkerPop's runners decide.
func same(exp, act any) bool {
	if exp == nil || act == nil {
		return exp == nil && act == nil
	}
	if u, ok := exp.(untypedNum); ok {
		return sameNumber(u.v, act)
	}
	if w, ok := exp.(widened); ok {
		switch w.v.(type) {
		case float32:
			if d, isDouble := act.(float64); isDouble {
				return float32(d) == w.v.(float32)
			}
		default:
			if _, isLong := act.(int64); isLong {
				return sameNumber(w.v, act)
			}
		}
		return same(w.v, act)
	}
	if jt := javaNumType(exp); jt != "" {
		if javaNumType(act) != jt {
			return false
		}
		if b, ok := act.(uint8); ok {
			act = int8(b) // gremlin-go decodes a (signed) Java Byte as a Go byte
		}
		return sameNumber(exp, act)
	}
	return sameValue(exp, act)
}

func sameNumber(exp, act any) bool {
	if ke, ie, fe, be := numOf(exp); ke != notNum {
		ka, ia, fa, ba := numOf(act)
		switch {
		case ka == notNum:
			return false
		case ke == intNum && ka == intNum:
			return ie == ia
		case be != nil && ba != nil:
			return be.Cmp(ba) == 0
		case math.IsNaN(fe) || math.IsNaN(fa):
			return math.IsNaN(fe) && math.IsNaN(fa)
		default:
			return fe == fa
		}
	}
	return false
}

func sameValue(exp, act any) bool {
	switch e := exp.(type) {
	case vref:
		a, ok := act.(*gremlingo.Vertex)
		return ok && sameID(e.id, a.Id)
	case eref:
		a, ok := act.(*gremlingo.Edge)
		return ok && sameID(e.id, a.Id)
	case vpref:
		a, ok := act.(*gremlingo.VertexProperty)
		return ok && a.Label == e.key && same(e.value, a.Value)
	case pathExp:
		a, ok := act.(*gremlingo.Path)
		if !ok || len(a.Objects) != len(e) {
			return false
		}
		for i := range e {
			if !same(e[i], a.Objects[i]) {
				return false
			}
		}
		return true
	case []any:
		a, ok := act.([]any)
		if !ok || len(a) != len(e) {
			return false
		}
		for i := range e {
			if !same(e[i], a[i]) {
				return false
			}
		}
		return true
	case setExp:
		var a []any
		x, ok := act.(*gremlingo.SimpleSet)
		if !ok {
			return false
		}
		a = x.ToSlice()
		return sameUnordered([]any(e), a)
	case mapExp:
		a, ok := act.(map[any]any)
		if p, isPtr := act.(*any); isPtr {
			a, ok = (*p).(map[any]any)
		}
		if !ok || len(a) != len(e) {
			return false
		}
		used := map[any]bool{}
	next:
		for _, kv := range e {
			for ak, av := range a {
				if used[ak] {
					continue
				}
				if sameKey(kv.k, keyOf(ak)) && same(kv.v, av) {
					used[ak] = true
					continue next
				}
			}
			return false
		}
		return true
	case time.Time:
		a, ok := act.(time.Time)
		return ok && a.Equal(e)
	case string:
		a, ok := act.(string)
		return ok && a == e
	case bool:
		a, ok := act.(bool)
		return ok && a == e
	}
	return false
}

// sameKey compares a map key; gremlin-go turns list keys into fmt.Sprint strings.
func sameKey(exp, act any) bool {
	if l, ok := exp.([]any); ok {
		if s, ok := act.(string); ok {
			return sprintGo(l) == s
		}
	}
	return same(exp, act)
}

func sprintGo(v any) string {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = sprintGo(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case vref:
		return fmt.Sprintf("v[%v]", x.id)
	case eref:
		return fmt.Sprintf("e[%v]", x.id)
	}
	return fmt.Sprint(v)
}

// keyOf undoes gremlin-go's map-key wrapping: unhashable keys (maps, lists)
// arrive as pointers.
func keyOf(k any) any {
	switch x := k.(type) {
	case *any:
		return *x
	}
	return k
}

func sameUnordered(exp, act []any) bool {
	if len(exp) != len(act) {
		return false
	}
	used := make([]bool, len(act))
next:
	for _, e := range exp {
		for i, a := range act {
			if !used[i] && same(e, a) {
				used[i] = true
				continue next
			}
		}
		return false
	}
	return true
}

// show renders an actual value deterministically (elements by id), for
// messages and for comparing results across processes.
func show(v any) string {
	var sb strings.Builder
	showTo(&sb, v)
	return sb.String()
}

func showTo(sb *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		sb.WriteString("null")
	case *gremlingo.Vertex:
		fmt.Fprintf(sb, "v[%v]", x.Id)
	case *gremlingo.Edge:
		fmt.Fprintf(sb, "e[%v][%v-%s->%v]", x.Id, x.OutV.Id, x.Label, x.InV.Id)
	case *gremlingo.VertexProperty:
		sb.WriteString("vp[" + x.Label + "->")
		showTo(sb, x.Value)
		sb.WriteString("]")
	case *gremlingo.Property:
		sb.WriteString("p[" + x.Key + "->")
		showTo(sb, x.Value)
		sb.WriteString("]")
	case *gremlingo.Path:
		sb.WriteString("path[")
		for i, o := range x.Objects {
			if i > 0 {
				sb.WriteString(", ")
			}
			showTo(sb, o)
		}
		sb.WriteString("]")
	case []any:
		sb.WriteString("[")
		for i, o := range x {
			if i > 0 {
				sb.WriteString(", ")
			}
			showTo(sb, o)
		}
		sb.WriteString("]")
	case *gremlingo.SimpleSet:
		parts := make([]string, 0)
		for _, o := range x.ToSlice() {
			parts = append(parts, show(o))
		}
		sort.Strings(parts)
		sb.WriteString("{" + strings.Join(parts, ", ") + "}")
	case map[any]any:
		parts := make([]string, 0, len(x))
		for k, v := range x {
			parts = append(parts, show(keyOf(k))+":"+show(v))
		}
		sort.Strings(parts)
		sb.WriteString("{" + strings.Join(parts, ", ") + "}")
	case string:
		sb.WriteString(strconv.Quote(x))
	case *gremlingo.BigDecimal:
		_, _, f, _ := numOf(x)
		fmt.Fprintf(sb, "%vM", f)
	case uuid.UUID:
		sb.WriteString(x.String())
	case time.Time:
		sb.WriteString(x.UTC().Format(time.RFC3339Nano))
	default:
		fmt.Fprintf(sb, "%v(%T)", x, x)
	}
}

func showExp(v any) string {
	switch x := v.(type) {
	case untypedNum:
		return fmt.Sprint(x.v)
	case widened:
		return showExp(x.v) + "(or Long/Double: literal widened by gremlin-go)"
	case vref:
		return fmt.Sprintf("v[%v]", x.id)
	case eref:
		return fmt.Sprintf("e[%v]", x.id)
	case vpref:
		return "vp[" + x.key + "->" + showExp(x.value) + "]"
	case pathExp:
		parts := []string{}
		for _, o := range x {
			parts = append(parts, showExp(o))
		}
		return "path[" + strings.Join(parts, ", ") + "]"
	case []any:
		parts := []string{}
		for _, o := range x {
			parts = append(parts, showExp(o))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case setExp:
		parts := []string{}
		for _, o := range x {
			parts = append(parts, showExp(o))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case mapExp:
		parts := []string{}
		for _, kv := range x {
			parts = append(parts, showExp(kv.k)+":"+showExp(kv.v))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return show(v)
}
