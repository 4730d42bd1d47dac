package traversal

import (
	"fmt"
	"sort"
	"strings"

	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

var builders map[string]stepFn

func init() {
	builders = map[string]stepFn{
		"V": runV, "E": runE, "inject": runInject,
		"addV": runAddV, "addE": runAddE, "property": runProperty, "drop": runDrop,
		"mergeV": runMergeV, "mergeE": runMergeE,
		"has": runHas, "hasLabel": runHasLabel, "hasId": runHasID, "hasNot": runHasNot,
		"hasKey": runHasKey, "hasValue": runHasValue, "is": runIs,
		"out": runAdj, "in": runAdj, "both": runAdj,
		"outE": runAdj, "inE": runAdj, "bothE": runAdj,
		"outV": runEdgeV, "inV": runEdgeV, "bothV": runEdgeV, "otherV": runEdgeV,
		"values": runValues, "properties": runProperties, "valueMap": runValueMap,
		"elementMap": runElementMap, "id": runID, "label": runLabel, "key": runKey, "value": runValue,
		"count": runCount, "sum": runReduce, "min": runReduce, "max": runReduce, "mean": runReduce,
		"limit": runRange, "range": runRange, "skip": runRange, "tail": runRange,
		"order": runOrder, "dedup": runDedup, "fold": runFold, "unfold": runUnfold,
		"coalesce": runCoalesce, "optional": runOptional, "constant": runConstant,
		"union": runUnion, "choose": runChoose, "where": runWhere,
		"not": runNot, "and": runAnd, "or": runOr,
		"select": runSelect, "project": runProject, "path": runPath,
		"simplePath": runSimplePath, "cyclicPath": runSimplePath,
		"repeat": runRepeat, "loops": runLoops,
		"group": runGroup, "groupCount": runGroupCount,
		"sideEffect": runSideEffect, "aggregate": runAggregate, "store": runAggregate, "cap": runCap,
		"fail": runFail, "identity": runIdentity, "local": runLocal, "barrier": runIdentity,
		"none": runNone, "discard": runNone, "timeLimit": runIdentity,
		"flatMap": runLocal, "map": runMap, "filter": runFilter, "element": runElement,
		"toUpper": runString, "toLower": runString, "trim": runString, "length": runString,
		"asString": runString, "concat": runConcat,
	}
}

func runIdentity(_ *execCtx, _ *step, in []*trav) ([]*trav, error) { return in, nil }
func runNone(_ *execCtx, _ *step, _ []*trav) ([]*trav, error)      { return nil, nil }

// ---- helpers ----

func elemID(o any) (any, bool) {
	switch x := o.(type) {
	case *graph.Vertex:
		return x.ID, true
	case *graph.Edge:
		return x.ID, true
	case *graph.VertexProperty:
		return x.ID, true
	}
	return nil, false
}

func elemLabel(o any) (string, bool) {
	switch x := o.(type) {
	case *graph.Vertex:
		return x.Label, true
	case *graph.Edge:
		return x.Label, true
	case *graph.VertexProperty:
		return x.Key, true
	}
	return "", false
}

// propValues returns the values of key on an element or map.
func propValues(o any, key string) []any {
	switch x := o.(type) {
	case *graph.Vertex:
		vps := x.Properties(key)
		out := make([]any, len(vps))
		for i, vp := range vps {
			out[i] = vp.Value
		}
		return out
	case *graph.Edge:
		if v, ok := x.Property(key); ok {
			return []any{v}
		}
	case *gb.Map:
		if v, ok := x.Get(key); ok {
			return []any{v}
		}
	}
	return nil
}

func tokenValue(o any, name string) (any, bool) {
	switch name {
	case "id":
		return elemID(o)
	case "label":
		l, ok := elemLabel(o)
		return l, ok
	case "key":
		switch x := o.(type) {
		case *graph.VertexProperty:
			return x.Key, true
		case *graph.Property:
			return x.Key, true
		case mapEntry:
			return x.k, true
		}
	case "value":
		switch x := o.(type) {
		case *graph.VertexProperty:
			return x.Value, true
		case *graph.Property:
			return x.Value, true
		case mapEntry:
			return x.v, true
		}
	}
	return nil, false
}

// byValue applies a by() modulator to an object.
func (ec *execCtx) byValue(b any, t *trav) (any, bool, error) {
	switch x := b.(type) {
	case nil:
		return t.obj, true, nil
	case string:
		vs := propValues(t.obj, x)
		if len(vs) == 0 {
			return nil, ec.productiveBy, nil
		}
		return vs[0], true, nil
	case gb.Enum:
		switch x.Type {
		case gb.TypeT:
			v, ok := tokenValue(t.obj, x.Name)
			return v, ok || ec.productiveBy, nil
		case gb.TypeColumn:
			return columnOf(t.obj, x.Name)
		case gb.TypeOrder:
			return t.obj, true, nil
		}
	case *Traversal:
		v, ok, err := ec.first(x, t)
		return v, ok || (err == nil && ec.productiveBy), err
	case byPair:
		return ec.byValue(x.key, t)
	}
	return nil, false, evalErr("unsupported by() modulator %v", b)
}

func columnOf(o any, name string) (any, bool, error) {
	switch x := o.(type) {
	case mapEntry:
		if name == "keys" {
			return x.k, true, nil
		}
		return x.v, true, nil
	case *gb.Map:
		out := make([]any, len(x.Entries))
		for i, e := range x.Entries {
			if name == "keys" {
				out[i] = e.Key
			} else {
				out[i] = e.Value
			}
		}
		if name == "keys" {
			return &gb.Set{Items: out}, true, nil
		}
		return out, true, nil
	case *pathValue:
		if name == "keys" {
			out := make([]any, len(x.labels))
			for i, l := range x.labels {
				s := make([]any, len(l))
				for j, e := range l {
					s[j] = e
				}
				out[i] = &gb.Set{Items: s}
			}
			return out, true, nil
		}
		return x.objs, true, nil
	}
	return nil, false, evalErr("Column.%s cannot be applied to %T", name, o)
}

func strArgs(s *step) ([]string, error) {
	out := make([]string, 0, len(s.args))
	for _, a := range s.args {
		str, ok := a.(string)
		if !ok {
			return nil, evalErr("%s() expects string arguments, got %T", s.op, a)
		}
		out = append(out, str)
	}
	return out, nil
}

func scopeLocal(args []any) ([]any, bool) {
	if len(args) > 0 {
		if e, ok := args[0].(gb.Enum); ok && e.Type == gb.TypeScope {
			return args[1:], e.Name == "local"
		}
	}
	return args, false
}

func idArg(a any) any {
	switch x := a.(type) {
	case *gb.Vertex:
		return x.ID
	case *gb.Edge:
		return x.ID
	case *graph.Vertex:
		return x.ID
	case *graph.Edge:
		return x.ID
	}
	return a
}

func asList(o any) ([]any, bool) {
	switch x := o.(type) {
	case []any:
		return x, true
	case *gb.Set:
		return x.Items, true
	case *pathValue:
		return x.objs, true
	}
	return nil, false
}

// ---- start / graph steps ----

func runV(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	var out []*trav
	ids := flattenValues(s.args)
	for _, t := range in {
		var vs []*graph.Vertex
		if len(ids) > 0 {
			for _, id := range ids {
				if v := ec.g.Vertex(idArg(id)); v != nil {
					vs = append(vs, v)
				}
			}
		} else {
			vs = ec.candidates(s.hints)
		}
		for _, v := range vs {
			if err := ec.tick(); err != nil {
				return nil, err
			}
			out = append(out, t.split(v))
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (ec *execCtx) candidates(hints []hint) []*graph.Vertex {
	best, bestN := -1, ec.g.VertexCount()+1
	for i, h := range hints {
		n := 0
		switch {
		case h.ids != nil:
			n = len(h.ids)
		case h.labels != nil:
			for _, l := range h.labels {
				n += ec.g.CountByLabel(l)
			}
		default:
			for _, v := range h.values {
				c, ok := ec.g.CountByProperty(h.key, v)
				if !ok {
					n = bestN + 1
					break
				}
				n += c
			}
		}
		if n < bestN {
			best, bestN = i, n
		}
	}
	if best < 0 {
		return ec.g.Vertices()
	}
	h := hints[best]
	var out []*graph.Vertex
	seen := map[*graph.Vertex]bool{}
	addAll := func(vs []*graph.Vertex) {
		for _, v := range vs {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	switch {
	case h.ids != nil:
		for _, id := range h.ids {
			if v := ec.g.Vertex(idArg(id)); v != nil {
				addAll([]*graph.Vertex{v})
			}
		}
	case h.labels != nil:
		if len(h.labels) == 1 {
			return ec.g.VerticesByLabel(h.labels[0])
		}
		for _, l := range h.labels {
			addAll(ec.g.VerticesByLabel(l))
		}
	default:
		if len(h.values) == 1 {
			vs, _ := ec.g.VerticesByProperty(h.key, h.values[0])
			return vs
		}
		for _, v := range h.values {
			vs, _ := ec.g.VerticesByProperty(h.key, v)
			addAll(vs)
		}
	}
	return out
}

func runE(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	var out []*trav
	ids := flattenValues(s.args)
	for _, t := range in {
		var es []*graph.Edge
		if len(ids) > 0 {
			for _, id := range ids {
				if e := ec.g.Edge(idArg(id)); e != nil {
					es = append(es, e)
				}
			}
		} else {
			es = ec.g.Edges()
		}
		for _, e := range es {
			if err := ec.tick(); err != nil {
				return nil, err
			}
			out = append(out, t.split(e))
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func runInject(_ *execCtx, s *step, in []*trav) ([]*trav, error) {
	var out []*trav
	for _, a := range s.args {
		out = append(out, fresh(a))
	}
	// At the start of a traversal the input is the single empty root traverser.
	if len(in) == 1 && in[0].obj == nil && in[0].path == nil {
		return out, nil
	}
	if s.childStart {
		// As the first step of a child traversal (concat(__.inject(x))) the
		// incoming traverser comes first, then the injected values.
		return append(append([]*trav(nil), in...), out...), nil
	}
	// Mid-traversal the injected values come first (g.V(1).values('name').inject('daniel') = daniel, marko).
	return append(out, in...), nil
}

// ---- filters ----

func filter(ec *execCtx, in []*trav, keep func(t *trav) (bool, error)) ([]*trav, error) {
	out := in[:0:0]
	for _, t := range in {
		if err := ec.tick(); err != nil {
			return nil, err
		}
		ok, err := keep(t)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// valueTest builds a test on a value from a has()-style argument.
func (ec *execCtx) valueTest(a any) (func(v any, t *trav) (bool, error), error) {
	if child, ok := a.(*Traversal); ok {
		return func(v any, t *trav) (bool, error) {
			out, err := ec.runChild(child, t.split(v))
			return len(out) > 0, err
		}, nil
	}
	p, err := buildPred(a)
	if err != nil {
		return nil, err
	}
	return func(v any, _ *trav) (bool, error) { return p(v), nil }, nil
}

func runHas(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	args := s.args
	var label *string
	if len(args) == 3 {
		l, ok := args[0].(string)
		if !ok {
			return nil, evalErr("has(label, key, value) expects a string label")
		}
		label = &l
		args = args[1:]
	}
	if len(args) == 1 {
		switch k := args[0].(type) {
		case string:
			return filter(ec, in, func(t *trav) (bool, error) { return len(propValues(t.obj, k)) > 0, nil })
		case gb.Enum:
			return filter(ec, in, func(t *trav) (bool, error) { _, ok := tokenValue(t.obj, k.Name); return ok, nil })
		}
		return nil, evalErr("has() expects a property key")
	}
	if len(args) != 2 {
		return nil, evalErr("has() takes 1 to 3 arguments")
	}
	test, err := ec.valueTest(args[1])
	if err != nil {
		return nil, err
	}
	return filter(ec, in, func(t *trav) (bool, error) {
		if label != nil {
			if l, ok := elemLabel(t.obj); !ok || l != *label {
				return false, nil
			}
		}
		var vals []any
		switch k := args[0].(type) {
		case string:
			vals = propValues(t.obj, k)
		case gb.Enum:
			if v, ok := tokenValue(t.obj, k.Name); ok {
				vals = []any{v}
			}
		default:
			return false, evalErr("has() expects a property key, got %T", args[0])
		}
		for _, v := range vals {
			ok, err := test(v, t)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	})
}

func tokenFilter(ec *execCtx, s *step, in []*trav, get func(o any) (any, bool)) ([]*trav, error) {
	var p pred
	if len(s.args) == 1 {
		if pp, ok := s.args[0].(*gb.P); ok {
			var err error
			if p, err = buildP(pp); err != nil {
				return nil, err
			}
		}
	}
	if p == nil {
		vals := flattenValues(s.args)
		for i, v := range vals {
			vals[i] = idArg(v)
		}
		var err error
		if p, err = buildP(&gb.P{Op: "within", Values: vals}); err != nil {
			return nil, err
		}
	}
	return filter(ec, in, func(t *trav) (bool, error) {
		v, ok := get(t.obj)
		return ok && p(v), nil
	})
}

func runHasLabel(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	return tokenFilter(ec, s, in, func(o any) (any, bool) { return elemLabel(o) })
}

func runHasID(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	return tokenFilter(ec, s, in, elemID)
}

func runHasKey(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	return tokenFilter(ec, s, in, func(o any) (any, bool) { return tokenValue(o, "key") })
}

func runHasValue(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	return tokenFilter(ec, s, in, func(o any) (any, bool) { return tokenValue(o, "value") })
}

func runHasNot(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	keys, err := strArgs(s)
	if err != nil || len(keys) != 1 {
		return nil, evalErr("hasNot() takes one property key")
	}
	return filter(ec, in, func(t *trav) (bool, error) { return len(propValues(t.obj, keys[0])) == 0, nil })
}

func runIs(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) != 1 {
		return nil, evalErr("is() takes one value or predicate")
	}
	p, err := buildPred(s.args[0])
	if err != nil {
		return nil, err
	}
	return filter(ec, in, func(t *trav) (bool, error) { return p(t.obj), nil })
}

// ---- navigation ----

func runAdj(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	labels, err := strArgs(s)
	if err != nil {
		return nil, err
	}
	match := func(e *graph.Edge) bool {
		if len(labels) == 0 {
			return true
		}
		for _, l := range labels {
			if e.Label == l {
				return true
			}
		}
		return false
	}
	dir := strings.TrimSuffix(s.op, "E")
	edges := s.op != dir
	var out []*trav
	for _, t := range in {
		v, ok := t.obj.(*graph.Vertex)
		if !ok {
			return nil, evalErr("%s() requires a vertex, got %s", s.op, describe(t.obj))
		}
		if dir == "out" || dir == "both" {
			for _, e := range v.OutEdges() {
				if match(e) {
					if edges {
						out = append(out, t.split(e))
					} else {
						out = append(out, t.split(e.In))
					}
				}
			}
		}
		if dir == "in" || dir == "both" {
			for _, e := range v.InEdges() {
				if match(e) {
					if edges {
						out = append(out, t.split(e))
					} else {
						out = append(out, t.split(e.Out))
					}
				}
			}
		}
		if err := ec.tick(); err != nil {
			return nil, err
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func describe(o any) string {
	switch x := o.(type) {
	case *graph.Vertex:
		return fmt.Sprintf("v[%v]", x.ID)
	case *graph.Edge:
		return fmt.Sprintf("e[%v]", x.ID)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", o)
}

func runEdgeV(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	var out []*trav
	for _, t := range in {
		e, ok := t.obj.(*graph.Edge)
		if !ok {
			return nil, evalErr("%s() requires an edge, got %s", s.op, describe(t.obj))
		}
		switch s.op {
		case "outV":
			out = append(out, t.split(e.Out))
		case "inV":
			out = append(out, t.split(e.In))
		case "bothV":
			out = append(out, t.split(e.Out), t.split(e.In))
		case "otherV":
			var prev any
			if t.path != nil && t.path.parent != nil {
				prev = t.path.parent.obj
			}
			if prev == any(e.Out) {
				out = append(out, t.split(e.In))
			} else if prev == any(e.In) {
				out = append(out, t.split(e.Out))
			} else {
				return nil, evalErr("otherV() needs the vertex the edge was reached from")
			}
		}
	}
	return out, nil
}

// ---- maps ----

func runValues(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	keys, err := strArgs(s)
	if err != nil {
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
				for _, vp := range x.Properties(k) {
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
	keys, err := strArgs(s)
	if err != nil {
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
				for _, vp := range x.Properties(k) {
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
		default:
			return nil, evalErr("properties() requires an element, got %s", describe(t.obj))
		}
	}
	return out, nil
}

var (
	tID    = gb.Enum{Type: gb.TypeT, Name: "id"}
	tLabel = gb.Enum{Type: gb.TypeT, Name: "label"}
	dirIn  = gb.Enum{Type: gb.TypeDirection, Name: "IN"}
	dirOut = gb.Enum{Type: gb.TypeDirection, Name: "OUT"}
)

func runValueMap(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	args := s.args
	tokens := false
	if len(args) > 0 {
		if b, ok := args[0].(bool); ok {
			tokens = b
			args = args[1:]
		}
	}
	if v, ok := s.with["~tinkerpop.valueMap.tokens"]; ok {
		tokens = true
		if n, ok := toInt64(v); ok && n == 0 {
			tokens = false
		}
	}
	keys := make([]string, 0, len(args))
	for _, a := range args {
		k, ok := a.(string)
		if !ok {
			return nil, evalErr("valueMap() expects property keys")
		}
		keys = append(keys, k)
	}
	var out []*trav
	for _, t := range in {
		m := &gb.Map{}
		var ks []string
		switch x := t.obj.(type) {
		case *graph.Vertex:
			ks = x.Keys()
		case *graph.Edge:
			ks = x.Keys()
		default:
			return nil, evalErr("valueMap() requires an element, got %s", describe(t.obj))
		}
		if len(keys) > 0 {
			ks = keys
		}
		if tokens {
			id, _ := elemID(t.obj)
			l, _ := elemLabel(t.obj)
			m.Entries = append(m.Entries, gb.MapEntry{Key: tID, Value: id}, gb.MapEntry{Key: tLabel, Value: l})
		}
		for _, k := range ks {
			vals := propValues(t.obj, k)
			if len(vals) == 0 {
				continue
			}
			var v any = vals
			if _, isEdge := t.obj.(*graph.Edge); isEdge {
				v = vals[0]
			}
			if len(s.by) > 0 {
				r, ok, err := ec.byValue(s.by[0], t.split(v))
				if err != nil {
					return nil, err
				}
				if !ok {
					continue
				}
				v = r
			}
			m.Entries = append(m.Entries, gb.MapEntry{Key: k, Value: v})
		}
		out = append(out, t.split(m))
	}
	return out, nil
}

func refMap(v *graph.Vertex) *gb.Map {
	return &gb.Map{Entries: []gb.MapEntry{{Key: tID, Value: v.ID}, {Key: tLabel, Value: v.Label}}}
}

func runElementMap(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	keys, err := strArgs(s)
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
		if len(keys) > 0 {
			ks = keys
		}
		for _, k := range ks {
			if vals := propValues(t.obj, k); len(vals) > 0 {
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
			out = append(out, t.split(x.Edge))
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

func reduce(op string, vals []any) (any, bool, error) {
	var acc any
	n := 0
	for _, v := range vals {
		if v == nil {
			continue
		}
		switch op {
		case "sum", "mean":
			if !isNumber(v) {
				return nil, false, evalErr("%s() requires numbers, got %T", op, v)
			}
			acc = add(acc, v)
		case "min", "max":
			if acc == nil {
				acc = v
			} else {
				c, ok := compare(v, acc)
				if !ok {
					return nil, false, evalErr("%s() cannot compare %T and %T", op, v, acc)
				}
				if (op == "min" && c < 0) || (op == "max" && c > 0) {
					acc = v
				}
			}
		}
		n++
	}
	if n == 0 {
		// Only nulls reduce to null; nothing reduces to nothing.
		return nil, len(vals) > 0, nil
	}
	if op == "mean" {
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
			v, ok, err := reduce(s.op, l)
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
	v, ok, err := reduce(s.op, vals)
	if err != nil || !ok {
		return nil, err
	}
	return []*trav{fresh(v)}, nil
}

func rangeBounds(s *step, args []any) (lo, hi int64, err error) {
	nums := make([]int64, len(args))
	for i, a := range args {
		n, ok := toInt64(a)
		if !ok {
			return 0, 0, evalErr("%s() takes integer arguments", s.op)
		}
		nums[i] = n
	}
	switch {
	case s.op == "limit" && len(nums) == 1:
		return 0, nums[0], nil
	case s.op == "range" && len(nums) == 2:
		return nums[0], nums[1], nil
	case s.op == "skip" && len(nums) == 1:
		return nums[0], -1, nil
	case s.op == "tail" && len(nums) <= 1:
		if len(nums) == 0 {
			return 1, 0, nil
		}
		return nums[0], 0, nil
	}
	return 0, 0, evalErr("%s(): wrong number of arguments", s.op)
}

func sliceRange(n int, op string, lo, hi int64) (int, int) {
	if op == "tail" {
		start := n - int(lo)
		if start < 0 {
			start = 0
		}
		return start, n
	}
	a, b := int(lo), n
	if hi >= 0 && int(hi) < n {
		b = int(hi)
	}
	if a > n {
		a = n
	}
	if a > b {
		a = b
	}
	return a, b
}

func runRange(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	args, local := scopeLocal(s.args)
	lo, hi, err := rangeBounds(s, args)
	if err != nil {
		return nil, err
	}
	if !local {
		a, b := sliceRange(len(in), s.op, lo, hi)
		return in[a:b], nil
	}
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		switch x := t.obj.(type) {
		case *gb.Map:
			a, b := sliceRange(len(x.Entries), s.op, lo, hi)
			out = append(out, t.split(&gb.Map{Entries: x.Entries[a:b]}))
		default:
			l, ok := asList(t.obj)
			if !ok {
				out = append(out, t)
				continue
			}
			a, b := sliceRange(len(l), s.op, lo, hi)
			sub := l[a:b]
			single := (s.op == "limit" && hi == 1) || (s.op == "tail" && lo == 1) || (s.op == "range" && hi-lo == 1)
			if single {
				if len(sub) == 1 {
					out = append(out, t.split(sub[0]))
				}
				continue
			}
			out = append(out, t.split(append([]any(nil), sub...)))
		}
	}
	return out, nil
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
	sort.SliceStable(rows, func(i, j int) bool {
		for k, sp := range specs {
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
	for _, sp := range specs {
		if sp.order == "shuffle" {
			return nil, evalErr("order().by(shuffle) is not supported by graphd")
		}
	}
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

func runDedup(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	args, local := scopeLocal(s.args)
	if len(args) > 0 {
		return nil, evalErr("dedup() with step labels is not supported by graphd")
	}
	var by any
	if len(s.by) > 0 {
		by = s.by[0]
	}
	if local {
		out := make([]*trav, 0, len(in))
		for _, t := range in {
			l, ok := asList(t.obj)
			if !ok {
				out = append(out, t)
				continue
			}
			seen := map[any]bool{}
			var r []any
			for _, e := range l {
				k := canon(e)
				if !seen[k] {
					seen[k] = true
					r = append(r, e)
				}
			}
			out = append(out, t.split(r))
		}
		return out, nil
	}
	seen := ec.dedupSeen[s]
	if seen == nil {
		seen = map[any]bool{}
	}
	out, err := filter(ec, in, func(t *trav) (bool, error) {
		v, ok, err := ec.byValue(by, t)
		if err != nil || !ok {
			return false, err
		}
		k := canon(v)
		if seen[k] {
			return false, nil
		}
		seen[k] = true
		return true, nil
	})
	for i, t := range out {
		if t.bulk > 1 {
			one := *t
			one.bulk = 0
			out[i] = &one
		}
	}
	return out, err
}

func runFold(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) != 0 {
		return nil, evalErr("fold(seed, operator) is not supported by graphd")
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

// ---- branching ----

func children(s *step) []*Traversal {
	out := make([]*Traversal, 0, len(s.args))
	for _, a := range s.args {
		if c, ok := a.(*Traversal); ok {
			out = append(out, c)
		}
	}
	return out
}

func runCoalesce(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	var out []*trav
	for _, t := range in {
		for _, c := range children(s) {
			r, err := ec.runChild(c, t)
			if err != nil {
				return nil, err
			}
			if len(r) > 0 {
				out = append(out, r...)
				break
			}
		}
	}
	return out, nil
}

func runOptional(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	c := s.args[0].(*Traversal)
	var out []*trav
	for _, t := range in {
		r, err := ec.runChild(c, t)
		if err != nil {
			return nil, err
		}
		if len(r) == 0 {
			out = append(out, t)
		} else {
			out = append(out, r...)
		}
	}
	return out, nil
}

func runUnion(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	var out []*trav
	// A branch holding a barrier (count(), fold(), ...) sees every incoming
	// traverser at once, as in TinkerPop: g.V(1,2).union(outE().count(), ...)
	// gives one count, not one per traverser.
	global := false
	for _, c := range children(s) {
		for _, st := range c.steps {
			if _, local := scopeLocal(st.args); barrierSteps[st.op] && !local {
				global = true
			}
		}
	}
	if global {
		for _, c := range children(s) {
			r, err := ec.run(c, in)
			if err != nil {
				return nil, err
			}
			out = append(out, r...)
			if err := ec.checkSize(len(out)); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	for _, t := range in {
		for _, c := range children(s) {
			r, err := ec.runChild(c, t)
			if err != nil {
				return nil, err
			}
			out = append(out, r...)
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func runLocal(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	c := s.args[0].(*Traversal)
	var out []*trav
	for _, t := range in {
		r, err := ec.runChild(c, t)
		if err != nil {
			return nil, err
		}
		out = append(out, r...)
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

func runFilter(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	c := s.args[0].(*Traversal)
	return filter(ec, in, func(t *trav) (bool, error) {
		r, err := ec.runChild(c, t)
		return len(r) > 0, err
	})
}

func runSideEffect(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	c := s.args[0].(*Traversal)
	for _, t := range in {
		if _, err := ec.runChild(c, t); err != nil {
			return nil, err
		}
	}
	return in, nil
}

func runNot(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	c := s.args[0].(*Traversal)
	return filter(ec, in, func(t *trav) (bool, error) {
		r, err := ec.runChild(c, t)
		return len(r) == 0, err
	})
}

func runAnd(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	cs := children(s)
	return filter(ec, in, func(t *trav) (bool, error) {
		for _, c := range cs {
			r, err := ec.runChild(c, t)
			if err != nil || len(r) == 0 {
				return false, err
			}
		}
		return true, nil
	})
}

func runOr(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	cs := children(s)
	return filter(ec, in, func(t *trav) (bool, error) {
		for _, c := range cs {
			r, err := ec.runChild(c, t)
			if err != nil {
				return false, err
			}
			if len(r) > 0 {
				return true, nil
			}
		}
		return false, nil
	})
}

func runChoose(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	var out []*trav
	branch := func(b any, t *trav) error {
		switch x := b.(type) {
		case *Traversal:
			r, err := ec.runChild(x, t)
			if err != nil {
				return err
			}
			out = append(out, r...)
		case nil:
			out = append(out, t)
		default:
			return evalErr("choose() branches must be traversals")
		}
		return nil
	}
	arg := func(i int) any {
		if i < len(s.args) {
			return s.args[i]
		}
		return nil
	}
	for _, t := range in {
		if len(s.args) >= 2 {
			var cond bool
			switch c := s.args[0].(type) {
			case *Traversal:
				r, err := ec.runChild(c, t)
				if err != nil {
					return nil, err
				}
				cond = len(r) > 0
			case *gb.P:
				p, err := buildP(c)
				if err != nil {
					return nil, err
				}
				cond = p(t.obj)
			default:
				return nil, evalErr("choose() condition must be a traversal or predicate")
			}
			var err error
			if cond {
				err = branch(arg(1), t)
			} else {
				err = branch(arg(2), t)
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		if len(s.args) != 1 {
			return nil, evalErr("choose() takes 1 to 3 arguments")
		}
		c, ok := s.args[0].(*Traversal)
		if !ok {
			return nil, evalErr("choose() takes a traversal")
		}
		key, has, err := ec.first(c, t)
		if err != nil {
			return nil, err
		}
		matched := false
		var none any
		hasNone := false
		for _, opt := range s.options {
			if len(opt) != 2 {
				return nil, evalErr("option() takes a key and a traversal")
			}
			if e, ok := opt[0].(gb.Enum); ok && e.Type == gb.TypePick {
				if e.Name == "none" {
					none, hasNone = opt[1], true
				} else if e.Name == "any" {
					if err := branch(opt[1], t); err != nil {
						return nil, err
					}
				}
				continue
			}
			if !has || matched {
				continue
			}
			hit := false
			if p, ok := opt[0].(*gb.P); ok {
				pp, err := buildP(p)
				if err != nil {
					return nil, err
				}
				hit = pp(key)
			} else {
				hit = equal(key, opt[0])
			}
			if hit {
				matched = true
				if err := branch(opt[1], t); err != nil {
					return nil, err
				}
			}
		}
		if !matched {
			if hasNone {
				if err := branch(none, t); err != nil {
					return nil, err
				}
			}
			// No matching option and no Pick.none: the traverser is filtered.
		}
	}
	return out, nil
}

func runRepeat(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	body := s.args[0].(*Traversal)
	test := func(c *Traversal, t *trav) (bool, error) {
		if c == nil {
			return true, nil
		}
		r, err := ec.runChild(c, t)
		return len(r) > 0, err
	}
	var out []*trav
	cur := make([]*trav, 0, len(in))
	for _, t := range in {
		n := *t
		n.loopStack = append(append([]int(nil), t.loopStack...), t.loops)
		n.loops = 0
		cur = append(cur, &n)
	}
	exit := func(t *trav) *trav {
		n := *t
		if k := len(t.loopStack); k > 0 {
			n.loops = t.loopStack[k-1]
			n.loopStack = t.loopStack[:k-1]
		}
		return &n
	}
	// checks before the first iteration
	if s.untilPre || s.emitPre {
		var next []*trav
		for _, t := range cur {
			if s.untilPre && s.until != nil {
				ok, err := test(s.until, t)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, exit(t))
					continue
				}
			}
			if s.emitPre && s.hasEmit {
				ok, err := test(s.emit, t)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, exit(t))
				}
			}
			next = append(next, t)
		}
		cur = next
	}
	// Steps of the body keep their state across iterations (as TinkerPop's
	// repeat traversal is not reset between loops): dedup() sees every loop.
	for _, bs := range body.steps {
		if bs.op == "dedup" {
			if ec.dedupSeen == nil {
				ec.dedupSeen = map[*step]map[any]bool{}
			}
			ec.dedupSeen[bs] = map[any]bool{}
			defer delete(ec.dedupSeen, bs)
		}
	}
	if s.timesPre && s.times <= 0 {
		// times(0).repeat(...) is while-do: no iteration.
		for _, t := range cur {
			out = append(out, exit(t))
		}
		cur = nil
	}
	for len(cur) > 0 {
		// repeat(...).times(n) is do-while: the body runs at least once.
		r, err := ec.run(body, cur)
		if err != nil {
			return nil, err
		}
		var next []*trav
		for _, t := range r {
			if err := ec.tick(); err != nil {
				return nil, err
			}
			n := *t
			n.loops++
			t = &n
			if s.hasTimes && t.loops >= s.times {
				out = append(out, exit(t))
				continue
			}
			if !s.untilPre && s.until != nil {
				ok, err := test(s.until, t)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, exit(t))
					continue
				}
			}
			if s.untilPre && s.until != nil {
				ok, err := test(s.until, t)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, exit(t))
					continue
				}
			}
			if s.hasEmit {
				ok, err := test(s.emit, t)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, exit(t))
				}
			}
			next = append(next, t)
		}
		if err := ec.checkSize(len(next) + len(out)); err != nil {
			return nil, err
		}
		if ec.bulking {
			next = ec.merge(next)
		}
		cur = next
		if s.until == nil && !s.hasTimes && !s.hasEmit {
			// repeat() with no exit condition: every traverser loops forever
			// unless the body stops producing; bounded by time and result limits.
			continue
		}
	}
	return out, nil
}

func runLoops(_ *execCtx, _ *step, in []*trav) ([]*trav, error) {
	out := make([]*trav, len(in))
	for i, t := range in {
		out[i] = t.split(int32(t.loops))
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
	keys := make([]string, 0, len(args))
	for _, a := range args {
		k, ok := a.(string)
		if !ok {
			return nil, evalErr("select() takes step labels")
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

func runProject(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	keys, err := strArgs(s)
	if err != nil || len(keys) == 0 {
		return nil, evalErr("project() takes one or more string keys")
	}
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		m := &gb.Map{}
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

// pathRange cuts a path to the part between the from() and to() labels
// (inclusive; the whole path when they are not given).
func pathRange(s *step, nodes []*pnode) []*pnode {
	lo, hi := 0, len(nodes)
	has := func(n *pnode, l any) bool {
		ls, _ := l.(string)
		for _, x := range n.labels {
			if x == ls {
				return true
			}
		}
		return false
	}
	if s.hasFrom {
		lo = len(nodes)
		for i, n := range nodes {
			if has(n, s.from) {
				lo = i
				break
			}
		}
	}
	if s.hasTo {
		hi = lo
		for i := len(nodes) - 1; i >= lo; i-- {
			if has(nodes[i], s.to) {
				hi = i + 1
				break
			}
		}
	}
	if lo > hi {
		return nil
	}
	return nodes[lo:hi]
}

func runSimplePath(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	want := s.op == "simplePath"
	return filter(ec, in, func(t *trav) (bool, error) {
		seen := map[any]bool{}
		simple := true
		for i, n := range pathRange(s, pathNodes(t)) {
			v, ok, err := ec.applyBy(s, i, n.obj, t)
			if err != nil {
				return false, err
			}
			if !ok {
				v = n.obj
			}
			k := canon(v)
			if seen[k] {
				simple = false
				break
			}
			seen[k] = true
		}
		return simple == want, nil
	})
}

// resolveWhere substitutes step labels in a where() predicate.
func (ec *execCtx) whereP(p *gb.P, t *trav, by func(v any) (any, bool, error)) (*gb.P, bool, error) {
	np := &gb.P{Op: p.Op, Text: p.Text}
	for _, v := range p.Values {
		switch x := v.(type) {
		case string:
			sel, ok := ec.selectOne(t, "last", x)
			if !ok {
				// Not a step label: a side effect of that name (withSideEffect).
				if se, isSE := ec.sideEffects[x]; isSE {
					sel, ok = se, true
				}
			}
			if !ok {
				return nil, false, nil
			}
			r, ok, err := by(sel)
			if err != nil || !ok {
				return nil, false, err
			}
			np.Values = append(np.Values, r)
		case *gb.P:
			q, ok, err := ec.whereP(x, t, by)
			if err != nil || !ok {
				return nil, ok, err
			}
			np.Values = append(np.Values, q)
		default:
			np.Values = append(np.Values, v)
		}
	}
	return np, true, nil
}

// whereLabels returns the start and end labels of a where() traversal:
// where(as('a')...as('b')) starts from the object labelled a and must end on
// the object labelled b (TinkerPop's WhereTraversalStep).
func whereLabels(c *Traversal) (start, end string) {
	if len(c.steps) == 0 {
		return "", ""
	}
	if f := c.steps[0]; f.op == "identity" && len(f.labels) == 1 {
		start = f.labels[0]
	}
	if l := c.steps[len(c.steps)-1]; len(l.labels) == 1 && (len(c.steps) > 1 || start == "") {
		end = l.labels[0]
	}
	return start, end
}

// whereTest evaluates a where() traversal (and/or/not of such traversals
// combine the same way) against t.
func (ec *execCtx) whereTest(c *Traversal, t *trav) (bool, error) {
	if len(c.steps) == 1 {
		st := c.steps[0]
		if len(st.labels) == 0 && (st.op == "and" || st.op == "or" || st.op == "not") {
			for _, a := range st.args {
				k, ok := a.(*Traversal)
				if !ok {
					continue
				}
				r, err := ec.whereTest(k, t)
				if err != nil {
					return false, err
				}
				switch {
				case st.op == "not":
					return !r, nil
				case st.op == "and" && !r:
					return false, nil
				case st.op == "or" && r:
					return true, nil
				}
			}
			return st.op == "and", nil
		}
	}
	start, end := whereLabels(c)
	in := t
	if start != "" {
		v, ok := ec.selectOne(t, "last", start)
		if !ok {
			return false, nil
		}
		in = t.split(v)
	}
	r, err := ec.runChild(c, in)
	if err != nil || end == "" {
		return len(r) > 0, err
	}
	want, ok := ec.selectOne(t, "last", end)
	if !ok {
		return false, nil
	}
	for _, o := range r {
		if equal(o.obj, want) {
			return true, nil
		}
	}
	return false, nil
}

func runWhere(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) == 1 {
		if c, ok := s.args[0].(*Traversal); ok {
			return filter(ec, in, func(t *trav) (bool, error) {
				return ec.whereTest(c, t)
			})
		}
	}
	var startKey string
	var p *gb.P
	switch len(s.args) {
	case 1:
		p, _ = s.args[0].(*gb.P)
	case 2:
		startKey, _ = s.args[0].(string)
		p, _ = s.args[1].(*gb.P)
	}
	if p == nil {
		return nil, evalErr("where() takes a traversal or a predicate")
	}
	return filter(ec, in, func(t *trav) (bool, error) {
		left := t.obj
		if startKey != "" {
			v, ok := ec.selectOne(t, "last", startKey)
			if !ok {
				return false, nil
			}
			left = v
		}
		lv, ok, err := ec.applyBy(s, 0, left, t)
		if err != nil || !ok {
			return false, err
		}
		rp, ok, err := ec.whereP(p, t, func(v any) (any, bool, error) { return ec.applyBy(s, 1, v, t) })
		if err != nil || !ok {
			return false, err
		}
		pp, err := buildP(rp)
		if err != nil {
			return false, err
		}
		return pp(lv), nil
	})
}

// ---- grouping, side effects ----

type omap struct {
	m   *gb.Map
	idx map[any]int
}

func newOmap() *omap { return &omap{m: &gb.Map{}, idx: map[any]int{}} }

func (o *omap) slot(k any) *any {
	c := canon(k)
	i, ok := o.idx[c]
	if !ok {
		i = len(o.m.Entries)
		o.idx[c] = i
		o.m.Entries = append(o.m.Entries, gb.MapEntry{Key: k})
	}
	return &o.m.Entries[i].Value
}

func runGroupCount(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) > 0 {
		return nil, evalErr("groupCount(sideEffectKey) is not supported by graphd; use groupCount().as(...)")
	}
	o := newOmap()
	for _, t := range in {
		k, ok, err := ec.applyBy(s, 0, t.obj, t)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		p := o.slot(k)
		n, _ := (*p).(int64)
		*p = n + t.n()
	}
	return []*trav{fresh(o.m)}, nil
}

func runGroup(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) > 0 {
		return nil, evalErr("group(sideEffectKey) is not supported by graphd; use group().as(...)")
	}
	var keyBy, valBy any
	if len(s.by) > 0 {
		keyBy = s.by[0]
	}
	hasVal := len(s.by) > 1
	if hasVal {
		valBy = s.by[1]
	}
	type bucket struct {
		key     any
		members []*trav
	}
	var buckets []*bucket
	idx := map[any]*bucket{}
	for _, t := range in {
		k, ok, err := ec.byValue(keyBy, t)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		c := canon(k)
		b := idx[c]
		if b == nil {
			b = &bucket{key: k}
			idx[c] = b
			buckets = append(buckets, b)
		}
		b.members = append(b.members, t)
	}
	if _, isTrav := valBy.(*Traversal); !isTrav {
		for _, b := range buckets {
			var err error
			if b.members, err = ec.expand(b.members); err != nil {
				return nil, err
			}
		}
	}
	m := &gb.Map{}
	for _, b := range buckets {
		var v any
		switch x := valBy.(type) {
		case *Traversal:
			r, err := ec.run(x, b.members)
			if err != nil {
				return nil, err
			}
			if endsWithBarrier(x) {
				if len(r) == 0 {
					continue
				}
				v = r[0].obj
			} else {
				l := make([]any, len(r))
				for i, e := range r {
					l[i] = e.obj
				}
				v = l
			}
		default:
			l := make([]any, 0, len(b.members))
			for _, t := range b.members {
				r, ok, err := ec.byValue(x, t)
				if err != nil {
					return nil, err
				}
				if ok {
					l = append(l, r)
				}
			}
			v = l
		}
		m.Entries = append(m.Entries, gb.MapEntry{Key: b.key, Value: v})
	}
	return []*trav{fresh(m)}, nil
}

var barrierSteps = map[string]bool{"count": true, "fold": true, "sum": true, "min": true, "max": true, "mean": true, "group": true, "groupCount": true}

func endsWithBarrier(t *Traversal) bool {
	if len(t.steps) == 0 {
		return false
	}
	last := t.steps[len(t.steps)-1]
	if _, local := scopeLocal(last.args); local {
		return false
	}
	return barrierSteps[last.op]
}

func runAggregate(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	args, _ := scopeLocal(s.args)
	if len(args) != 1 {
		return nil, evalErr("%s() takes a side-effect key", s.op)
	}
	key, ok := args[0].(string)
	if !ok {
		return nil, evalErr("%s() takes a side-effect key", s.op)
	}
	var set *gb.Set
	var l []any
	switch x := ec.sideEffects[key].(type) {
	case nil:
	case []any:
		l = x
	case *gb.Set:
		set = &gb.Set{Items: append([]any(nil), x.Items...)}
	default:
		return nil, evalErr("%s('%s'): the side effect holds %s, which %s() cannot add to without an operator", s.op, key, describe(x), s.op)
	}
	for _, t := range in {
		v, ok, err := ec.applyBy(s, 0, t.obj, t)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if set != nil {
			dup := false
			for _, e := range set.Items {
				if equal(e, v) {
					dup = true
					break
				}
			}
			if !dup {
				set.Items = append(set.Items, v)
			}
			continue
		}
		l = append(l, v)
	}
	if set != nil {
		ec.sideEffects[key] = set
		return in, nil
	}
	if l == nil {
		l = []any{}
	}
	ec.sideEffects[key] = l
	return in, nil
}

func runCap(ec *execCtx, s *step, _ []*trav) ([]*trav, error) {
	keys, err := strArgs(s)
	if err != nil || len(keys) == 0 {
		return nil, evalErr("cap() takes side-effect keys")
	}
	get := func(k string) any {
		if v, ok := ec.sideEffects[k]; ok {
			return v
		}
		return []any{}
	}
	if len(keys) == 1 {
		return []*trav{fresh(get(keys[0]))}, nil
	}
	m := &gb.Map{}
	for _, k := range keys {
		m.Entries = append(m.Entries, gb.MapEntry{Key: k, Value: get(k)})
	}
	return []*trav{fresh(m)}, nil
}

func runFail(_ *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(in) == 0 {
		return nil, nil
	}
	msg := "fail() step triggered"
	if len(s.args) > 0 {
		if m, ok := s.args[0].(string); ok {
			msg = m
		}
	}
	return nil, &Error{Code: gb.StatusFailStep, Msg: msg}
}
