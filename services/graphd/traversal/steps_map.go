package traversal

import (
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// Map steps: values, properties, valueMap, elementMap, tokens, strings, reductions, order, fold/unfold,
// select, project, path, loops.

// ---- maps ----

func runValues(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	keys, none, err := propertyKeys(s.op, s.args)
	if err != nil || none {
		return nil, err
	}
	var out []*trav
	for _, t := range in {
		switch x := t.obj.(type) {
		case *graph.Vertex:
			ks := keys
			if len(ks) == 0 {
				ks = x.Keys()
			}
			for _, k := range ks {
				vps, err := ec.vertexProps(x, k)
				if err != nil {
					return nil, err
				}
				for _, vp := range vps {
					out = append(out, t.split(vp.Value))
				}
			}
		case *graph.Edge:
			ks := keys
			if len(ks) == 0 {
				ks = x.Keys()
			}
			for _, k := range ks {
				if v, ok := x.Property(k); ok {
					out = append(out, t.split(v))
				}
			}
		case *graph.VertexProperty:
			ks := keys
			if len(ks) == 0 {
				ks = x.MetaKeys()
			}
			for _, k := range ks {
				if v, ok := x.Meta(k); ok {
					out = append(out, t.split(v))
				}
			}
		case *gb.Map:
			for _, k := range keys {
				if v, ok := x.Get(k); ok {
					out = append(out, t.split(v))
				}
			}
		default:
			return nil, evalErr("values() requires an element, got %s", describe(t.obj))
		}
		if err := ec.tick(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func runProperties(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	keys, none, err := propertyKeys(s.op, s.args)
	if err != nil || none {
		return nil, err
	}
	var out []*trav
	for _, t := range in {
		switch x := t.obj.(type) {
		case *graph.Vertex:
			ks := keys
			if len(ks) == 0 {
				ks = x.Keys()
			}
			for _, k := range ks {
				vps, err := ec.vertexProps(x, k)
				if err != nil {
					return nil, err
				}
				for _, vp := range vps {
					out = append(out, t.split(vp))
				}
			}
		case *graph.Edge:
			ks := keys
			if len(ks) == 0 {
				ks = x.Keys()
			}
			for _, k := range ks {
				if v, ok := x.Property(k); ok {
					out = append(out, t.split(&graph.Property{Key: k, Value: v, Edge: x}))
				}
			}
		case *graph.VertexProperty:
			ks := keys
			if len(ks) == 0 {
				ks = x.MetaKeys()
			}
			for _, k := range ks {
				if v, ok := x.Meta(k); ok {
					out = append(out, t.split(&graph.Property{Key: k, Value: v, VP: x}))
				}
			}
		default:
			return nil, evalErr("properties() requires an element, got %s", describe(t.obj))
		}
	}
	return out, nil
}

func runValueMap(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	args := s.args
	// includeID/includeLabel: valueMap(true) or with(WithOptions.tokens[, ids|labels|all|none]).
	includeID, includeLabel := false, false
	if len(args) > 0 {
		if b, ok := args[0].(bool); ok {
			includeID, includeLabel = b, b
			args = args[1:]
		}
	}
	if v, ok := s.mods().with["~tinkerpop.valueMap.tokens"]; ok {
		bits := int64(15) // WithOptions.all
		if n, ok := toInt64(v); ok {
			bits = n
		}
		includeID, includeLabel = bits&1 != 0, bits&2 != 0
	}
	keys, none, err := propertyKeys("valueMap", args)
	if err != nil {
		return nil, err
	}
	var out []*trav
	for _, t := range in {
		m := &gb.Map{}
		var ks []string
		_, isEdge := t.obj.(*graph.Edge)
		if _, isVP := t.obj.(*graph.VertexProperty); isVP {
			isEdge = true // one value per key
		}
		switch x := t.obj.(type) {
		case *graph.Vertex:
			ks = x.Keys()
		case *graph.Edge:
			ks = x.Keys()
		case *graph.VertexProperty:
			ks = x.MetaKeys()
		default:
			return nil, evalErr("valueMap() requires an element, got %s", describe(t.obj))
		}
		if len(keys) > 0 || none {
			ks = keys
		}
		if includeID {
			id, _ := elemID(t.obj)
			m.Entries = append(m.Entries, gb.MapEntry{Key: tID, Value: id})
		}
		if includeLabel {
			l, _ := elemLabel(t.obj)
			m.Entries = append(m.Entries, gb.MapEntry{Key: tLabel, Value: l})
		}
		for _, k := range ks {
			vals, err := ec.propValues(t.obj, k)
			if err != nil {
				return nil, err
			}
			if len(vals) == 0 {
				continue
			}
			var v any = vals
			if isEdge {
				v = vals[0]
			}
			m.Entries = append(m.Entries, gb.MapEntry{Key: k, Value: v})
		}
		if len(s.by) > 0 {
			// The by() modulators form a ring over the map's entries (tokens
			// included), in order; an entry whose by() produces nothing is
			// removed (ValueMapStep's TraversalRing).
			kept := m.Entries[:0:0]
			for i, e := range m.Entries {
				r, ok, err := ec.byValue(s.by[i%len(s.by)], t.split(e.Value))
				if err != nil {
					return nil, err
				}
				if ok {
					kept = append(kept, gb.MapEntry{Key: e.Key, Value: r})
				}
			}
			m.Entries = kept
		}
		out = append(out, t.split(m))
	}
	return out, nil
}

func refMap(v *graph.Vertex) *gb.Map {
	return &gb.Map{Entries: []gb.MapEntry{{Key: tID, Value: v.ID}, {Key: tLabel, Value: v.Label}}}
}

func runElementMap(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	keys, none, err := propertyKeys(s.op, s.args)
	if err != nil {
		return nil, err
	}
	var out []*trav
	for _, t := range in {
		m := &gb.Map{}
		var ks []string
		switch x := t.obj.(type) {
		case *graph.Vertex:
			m.Entries = append(m.Entries, gb.MapEntry{Key: tID, Value: x.ID}, gb.MapEntry{Key: tLabel, Value: x.Label})
			ks = x.Keys()
		case *graph.Edge:
			m.Entries = append(m.Entries, gb.MapEntry{Key: tID, Value: x.ID}, gb.MapEntry{Key: tLabel, Value: x.Label},
				gb.MapEntry{Key: dirIn, Value: refMap(x.In)}, gb.MapEntry{Key: dirOut, Value: refMap(x.Out)})
			ks = x.Keys()
		default:
			return nil, evalErr("elementMap() requires an element, got %s", describe(t.obj))
		}
		if len(keys) > 0 || none {
			ks = keys
		}
		for _, k := range ks {
			vals, err := ec.propValues(t.obj, k)
			if err != nil {
				return nil, err
			}
			if len(vals) > 0 {
				m.Entries = append(m.Entries, gb.MapEntry{Key: k, Value: vals[0]})
			}
		}
		out = append(out, t.split(m))
	}
	return out, nil
}

func mapToken(ec *execCtx, in []*trav, name string) ([]*trav, error) {
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		v, ok := tokenValue(t.obj, name)
		if !ok {
			return nil, evalErr("%s() cannot be applied to %s", name, describe(t.obj))
		}
		out = append(out, t.split(v))
	}
	return out, nil
}

func runID(ec *execCtx, _ *step, in []*trav) ([]*trav, error)    { return mapToken(ec, in, "id") }
func runLabel(ec *execCtx, _ *step, in []*trav) ([]*trav, error) { return mapToken(ec, in, "label") }
func runKey(ec *execCtx, _ *step, in []*trav) ([]*trav, error)   { return mapToken(ec, in, "key") }
func runValue(ec *execCtx, _ *step, in []*trav) ([]*trav, error) { return mapToken(ec, in, "value") }

func runElement(ec *execCtx, _ *step, in []*trav) ([]*trav, error) {
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		switch x := t.obj.(type) {
		case *graph.VertexProperty:
			out = append(out, t.split(x.Vertex))
		case *graph.Property:
			if x.VP != nil {
				out = append(out, t.split(x.VP))
			} else {
				out = append(out, t.split(x.Edge))
			}
		default:
			return nil, evalErr("element() requires a property")
		}
	}
	return out, nil
}

func runConstant(_ *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) != 1 {
		return nil, evalErr("constant() takes one value")
	}
	out := make([]*trav, len(in))
	for i, t := range in {
		out[i] = t.split(s.args[0])
	}
	return out, nil
}

func runString(_ *execCtx, s *step, in []*trav) ([]*trav, error) {
	local := false
	if _, l := scopeLocal(s.args); l {
		local = true
	}
	apply := func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		if s.op == "asString" {
			if str, ok := v.(string); ok {
				return str, nil
			}
			return gremlinString(v), nil
		}
		str, ok := v.(string)
		if !ok {
			return nil, evalErr("%s() requires a string, got %T", s.op, v)
		}
		switch s.op {
		case "toUpper":
			return strings.ToUpper(str), nil
		case "toLower":
			return strings.ToLower(str), nil
		case "trim":
			return strings.TrimSpace(str), nil
		case "length":
			return int32(len([]rune(str))), nil
		}
		return nil, nil
	}
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		if l, ok := asList(t.obj); ok && local {
			r := make([]any, len(l))
			for i, e := range l {
				v, err := apply(e)
				if err != nil {
					return nil, err
				}
				r[i] = v
			}
			out = append(out, t.split(r))
			continue
		}
		v, err := apply(t.obj)
		if err != nil {
			return nil, err
		}
		out = append(out, t.split(v))
	}
	return out, nil
}

func runConcat(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		var sb strings.Builder
		allNull := true
		switch x := t.obj.(type) {
		case nil:
		case string:
			sb.WriteString(x)
			allNull = false
		default:
			return nil, evalErr("String concat() can only take string as argument, got %s", describe(x))
		}
		for _, a := range s.args {
			v := a
			if c, ok := a.(*Traversal); ok {
				r, ok, err := ec.first(c, t)
				if err != nil {
					return nil, err
				}
				if !ok {
					r = nil
				}
				v = r
			}
			switch x := v.(type) {
			case nil:
			case string:
				sb.WriteString(x)
				allNull = false
			default:
				return nil, evalErr("String concat() can only take string as argument, got %s", describe(x))
			}
		}
		if allNull {
			out = append(out, t.split(nil))
			continue
		}
		out = append(out, t.split(sb.String()))
	}
	return out, nil
}

// ---- reducing ----

func runCount(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if _, local := scopeLocal(s.args); local {
		out := make([]*trav, 0, len(in))
		for _, t := range in {
			n := int64(1)
			if l, ok := asList(t.obj); ok {
				n = int64(len(l))
			} else if m, ok := t.obj.(*gb.Map); ok {
				n = int64(len(m.Entries))
			}
			out = append(out, t.split(n))
		}
		return out, nil
	}
	n := int64(0)
	for _, t := range in {
		n += t.n()
	}
	return []*trav{fresh(n)}, nil
}

// reduce is sum/min/max/mean over vals (nulls skipped) with TinkerPop's
// number types (NumberHelper, see numbers.go). global: the step's global
// form, where TinkerPop first multiplies each value by its traverser's bulk,
// a Long, so a global sum of Integers is a Long (local sums stay in the
// values' common class).
func reduce(op string, vals []any, global bool) (any, bool, error) {
	var acc any
	var fsum, comp float64
	n := int64(0)
	for _, v := range vals {
		if v == nil {
			continue
		}
		var err error
		switch op {
		case "sum", "mean":
			if !isNumber(v) {
				return nil, false, evalErr("%s() requires numbers, got %s", op, describe(v))
			}
			if global {
				if v, err = numOp("*", v, int64(1), false); err != nil {
					return nil, false, err
				}
			}
			if acc == nil {
				acc = v
			} else if acc, err = numOp("+", acc, v, false); err != nil {
				return nil, false, err
			}
			f, _ := toFloat(v)
			// Neumaier's compensated sum: a Double total does not depend on
			// the order the values arrive in (up to the last bit).
			t := fsum + f
			if math.Abs(fsum) >= math.Abs(f) {
				comp += (fsum - t) + f
			} else {
				comp += (f - t) + fsum
			}
			fsum = t
		case "min", "max":
			if acc, err = numMinMax(op, acc, v); err != nil {
				return nil, false, err
			}
		}
		n++
	}
	if n == 0 {
		// Only nulls reduce to null; nothing reduces to nothing.
		return nil, len(vals) > 0, nil
	}
	if _, isDouble := acc.(float64); isDouble && (op == "sum" || op == "mean") {
		if !math.IsInf(fsum, 0) && !math.IsNaN(fsum) {
			acc = fsum + comp
		}
	}
	if op == "mean" {
		// div(sum, count, true): a Double, or a BigDecimal for big numbers.
		switch acc.(type) {
		case *big.Int, *gb.BigDecimal:
			m, err := numOp("/", acc, n, true)
			return m, err == nil, err
		}
		f, _ := toFloat(acc)
		return f / float64(n), true, nil
	}
	return acc, true, nil
}

func runReduce(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if _, local := scopeLocal(s.args); local {
		var out []*trav
		for _, t := range in {
			l, ok := asList(t.obj)
			if !ok {
				l = []any{t.obj}
			}
			v, ok, err := reduce(s.op, l, false)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, t.split(v))
			}
		}
		return out, nil
	}
	vals := make([]any, len(in))
	for i, t := range in {
		vals[i] = t.obj
	}
	v, ok, err := reduce(s.op, vals, true)
	if err != nil || !ok {
		return nil, err
	}
	return []*trav{fresh(v)}, nil
}

type sortKey struct {
	by    any
	order string
}

func orderSpecs(s *step) []sortKey {
	var specs []sortKey
	for _, b := range s.by {
		switch x := b.(type) {
		case byPair:
			o := "asc"
			if e, ok := x.order.(gb.Enum); ok {
				o = e.Name
			}
			specs = append(specs, sortKey{by: x.key, order: o})
		case gb.Enum:
			if x.Type == gb.TypeOrder {
				specs = append(specs, sortKey{by: nil, order: x.Name})
			} else {
				specs = append(specs, sortKey{by: x, order: "asc"})
			}
		default:
			specs = append(specs, sortKey{by: b, order: "asc"})
		}
	}
	if len(specs) == 0 {
		specs = []sortKey{{order: "asc"}}
	}
	return specs
}

func (ec *execCtx) sortTravs(specs []sortKey, in []*trav) ([]*trav, error) {
	// Order.shuffle (TinkerPop's MultiComparator): the comparators before
	// the last shuffle are ignored; a shuffle last shuffles the traversers
	// (a by() that produces nothing still drops its traverser).
	first, shuffle := 0, false
	for k := len(specs) - 1; k >= 0; k-- {
		if specs[k].order == "shuffle" {
			first, shuffle = k+1, k == len(specs)-1
			break
		}
	}
	type row struct {
		t    *trav
		keys []any
	}
	rows := make([]row, 0, len(in))
	for _, t := range in {
		r := row{t: t}
		keep := true
		for _, sp := range specs {
			v, ok, err := ec.byValue(sp.by, t)
			if err != nil {
				return nil, err
			}
			if !ok {
				keep = false
				break
			}
			r.keys = append(r.keys, v)
		}
		if keep {
			rows = append(rows, r)
		}
	}
	if shuffle {
		rand.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if shuffle {
			return false
		}
		for k := first; k < len(specs); k++ {
			sp := specs[k]
			c := orderCompare(rows[i].keys[k], rows[j].keys[k])
			if sp.order == "desc" || sp.order == "decr" {
				c = -c
			}
			if c != 0 {
				return c < 0
			}
		}
		return false
	})
	out := make([]*trav, len(rows))
	for i, r := range rows {
		out[i] = r.t
	}
	return out, nil
}

func runOrder(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	specs := orderSpecs(s)
	if _, local := scopeLocal(s.args); !local {
		return ec.sortTravs(specs, in)
	}
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		switch x := t.obj.(type) {
		case *gb.Map:
			items := make([]*trav, len(x.Entries))
			for i, e := range x.Entries {
				items[i] = fresh(mapEntry{e.Key, e.Value})
			}
			sorted, err := ec.sortTravs(specs, items)
			if err != nil {
				return nil, err
			}
			m := &gb.Map{}
			for _, st := range sorted {
				e := st.obj.(mapEntry)
				m.Entries = append(m.Entries, gb.MapEntry{Key: e.k, Value: e.v})
			}
			out = append(out, t.split(m))
		default:
			l, ok := asList(t.obj)
			if !ok {
				out = append(out, t)
				continue
			}
			items := make([]*trav, len(l))
			for i, e := range l {
				items[i] = fresh(e)
			}
			sorted, err := ec.sortTravs(specs, items)
			if err != nil {
				return nil, err
			}
			r := make([]any, len(sorted))
			for i, st := range sorted {
				r[i] = st.obj
			}
			out = append(out, t.split(r))
		}
	}
	return out, nil
}

func runFold(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) == 2 {
		// fold(seed, operator): reduce the values into the seed.
		op, ok := s.args[1].(gb.Enum)
		if !ok || op.Type != gb.TypeOperator || !sideEffectOps[op.Name] {
			return nil, evalErr("fold(seed, operator) takes an Operator, got %s", describe(s.args[1]))
		}
		acc := s.args[0]
		for _, t := range in {
			for j := int64(0); j < t.n(); j++ {
				r, err := foldOperator(op.Name, acc, t.obj)
				if err != nil {
					return nil, err
				}
				acc = r
			}
		}
		return []*trav{fresh(acc)}, nil
	}
	if len(s.args) != 0 {
		return nil, evalErr("fold() takes no argument or a seed and an operator")
	}
	l := make([]any, len(in))
	for i, t := range in {
		l[i] = t.obj
	}
	return []*trav{fresh(l)}, nil
}

func runUnfold(ec *execCtx, _ *step, in []*trav) ([]*trav, error) {
	var out []*trav
	for _, t := range in {
		switch x := t.obj.(type) {
		case *gb.Map:
			for _, e := range x.Entries {
				out = append(out, t.split(mapEntry{e.Key, e.Value}))
			}
		default:
			if l, ok := asList(t.obj); ok {
				for _, e := range l {
					out = append(out, t.split(e))
				}
			} else {
				out = append(out, t)
			}
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func runMap(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	c := s.args[0].(*Traversal)
	var out []*trav
	for _, t := range in {
		v, ok, err := ec.first(c, t)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t.split(v))
		}
	}
	return out, nil
}

func runLoops(_ *execCtx, s *step, in []*trav) ([]*trav, error) {
	name := ""
	if len(s.args) == 1 {
		n, ok := s.args[0].(string)
		if !ok {
			return nil, evalErr("loops() takes a loop name (a string)")
		}
		name = n
	}
	out := make([]*trav, len(in))
	for i, t := range in {
		n := t.loops
		if name != "" {
			level := -1
			for j := len(t.loopNames) - 1; j >= 0; j-- {
				if t.loopNames[j] == name {
					level = j
					break
				}
			}
			switch {
			case level < 0:
				return nil, evalErr("Loop name not defined: %s", name)
			case level < len(t.loopNames)-1:
				// an outer loop: its count was saved when the next one began
				n = t.loopStack[level+1]
			}
		}
		out[i] = t.split(int32(n))
	}
	return out, nil
}

// ---- paths, labels ----

func pathNodes(t *trav) []*pnode {
	var nodes []*pnode
	for n := t.path; n != nil; n = n.parent {
		nodes = append(nodes, n)
	}
	for i, j := 0, len(nodes)-1; i < j; i, j = i+1, j-1 {
		nodes[i], nodes[j] = nodes[j], nodes[i]
	}
	return nodes
}

func (ec *execCtx) selectOne(t *trav, pop string, key string) (any, bool) {
	if m, ok := t.obj.(*gb.Map); ok {
		if v, ok := m.Get(key); ok {
			return v, true
		}
	}
	var found []any
	for _, n := range pathNodes(t) {
		for _, l := range n.labels {
			if l == key {
				found = append(found, n.obj)
				break
			}
		}
	}
	if len(found) > 0 {
		switch pop {
		case "first":
			return found[0], true
		case "all":
			return found, true
		case "mixed":
			if len(found) == 1 {
				return found[0], true
			}
			return found, true
		}
		return found[len(found)-1], true
	}
	if v, ok := ec.sideEffects[key]; ok {
		return v, true
	}
	return nil, false
}

func (ec *execCtx) applyBy(s *step, i int, v any, t *trav) (any, bool, error) {
	if len(s.by) == 0 {
		return v, true, nil
	}
	return ec.byValue(s.by[i%len(s.by)], t.split(v))
}

func runSelect(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	args := s.args
	pop := "last"
	if len(args) > 0 {
		if e, ok := args[0].(gb.Enum); ok && e.Type == gb.TypePop {
			pop = e.Name
			args = args[1:]
		}
	}
	if len(args) == 1 {
		if e, ok := args[0].(gb.Enum); ok && e.Type == gb.TypeColumn {
			out := make([]*trav, 0, len(in))
			for _, t := range in {
				v, ok, err := columnOf(t.obj, e.Name)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, t.split(v))
				}
			}
			return out, nil
		}
	}
	if len(args) == 1 {
		if c, ok := args[0].(*Traversal); ok {
			return ec.selectByTraversal(s, pop, c, in)
		}
	}
	keys := make([]string, 0, len(args))
	for _, a := range args {
		k, ok := a.(string)
		if !ok {
			return nil, evalErr("select() takes step labels or one traversal")
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, evalErr("select() needs at least one key")
	}
	var out []*trav
	for _, t := range in {
		if len(keys) == 1 {
			v, ok := ec.selectOne(t, pop, keys[0])
			if !ok {
				continue
			}
			v, ok, err := ec.applyBy(s, 0, v, t)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, t.split(v))
			}
			continue
		}
		m := &gb.Map{}
		complete := true
		for i, k := range keys {
			v, ok := ec.selectOne(t, pop, k)
			if !ok {
				complete = false
				break
			}
			v, ok, err := ec.applyBy(s, i, v, t)
			if err != nil {
				return nil, err
			}
			if !ok {
				complete = false
				break
			}
			m.Entries = append(m.Entries, gb.MapEntry{Key: k, Value: v})
		}
		if complete {
			out = append(out, t.split(m))
		}
	}
	return out, nil
}

// selectByTraversal is select([pop,] traversal) (TraversalSelectStep): the
// traversal's first result is the key, looked up as Scoping does (a key of
// the current map, Java's equals; a side effect or step label for a string);
// no key or no such key filters the traverser.
func (ec *execCtx) selectByTraversal(s *step, pop string, c *Traversal, in []*trav) ([]*trav, error) {
	var out []*trav
	for _, t := range in {
		key, ok, err := ec.first(c, t)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		var v any
		found := false
		if m, isMap := t.obj.(*gb.Map); isMap {
			v, found = m.Get(key)
		}
		if k, isStr := key.(string); isStr && !found {
			if _, isMap := t.obj.(*gb.Map); isMap {
				// the map lacks the key: a side effect or step label
				v, found = ec.selectOne(&trav{path: t.path, obj: nil}, pop, k)
			} else {
				v, found = ec.selectOne(t, pop, k)
			}
		}
		if !found {
			continue
		}
		v, ok, err = ec.applyBy(s, 0, v, t)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t.split(v))
		}
	}
	return out, nil
}

func runProject(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	keys, err := strArgs(s)
	if err != nil || len(keys) == 0 {
		return nil, evalErr("project() takes one or more string keys")
	}
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		m := &gb.Map{Entries: make([]gb.MapEntry, 0, len(keys))}
		for i, k := range keys {
			v, ok, err := ec.applyBy(s, i, t.obj, t)
			if err != nil {
				return nil, err
			}
			if ok {
				m.Entries = append(m.Entries, gb.MapEntry{Key: k, Value: v})
			}
		}
		out = append(out, t.split(m))
	}
	return out, nil
}

func runPath(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	out := make([]*trav, 0, len(in))
outer:
	for _, t := range in {
		p := &pathValue{}
		for i, n := range pathRange(s, pathNodes(t)) {
			v, ok, err := ec.applyBy(s, i, n.obj, t)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue outer
			}
			p.objs = append(p.objs, v)
			ls := n.labels
			if ls == nil {
				ls = []string{}
			}
			p.labels = append(p.labels, ls)
		}
		out = append(out, t.split(p))
	}
	return out, nil
}
