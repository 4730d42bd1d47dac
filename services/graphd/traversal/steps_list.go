package traversal

import (
	"fmt"
	"strings"

	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// List steps (TinkerPop 3.7): combine, merge, difference, intersect,
// disjunct, product, conjoin, any, all, reverse, index.

// javaClass names a value's type the way TinkerPop's error messages do.
func javaClass(v any) string {
	switch v.(type) {
	case string:
		return "class java.lang.String"
	case int32:
		return "class java.lang.Integer"
	case int64:
		return "class java.lang.Long"
	case float64:
		return "class java.lang.Double"
	case *gb.Map:
		return "class java.util.LinkedHashMap"
	}
	return fmt.Sprintf("class %s", describe(v))
}

// incomingList is the traverser's collection for a list step.
func incomingList(op string, v any) ([]any, error) {
	if v == nil {
		return nil, evalErr("Incoming traverser for %s step can't be null", op)
	}
	if l, ok := asList(v); ok {
		return l, nil
	}
	return nil, evalErr("%s step can only take an array or an Iterable type for incoming traversers, encountered: %s", op, javaClass(v))
}

// argumentList evaluates a list step's argument (a constant or a traversal
// whose first result is taken) to a collection.
func (ec *execCtx) argumentList(op string, a any, t *trav) ([]any, error) {
	if c, ok := a.(*Traversal); ok {
		v, found, err := ec.first(c, t)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, evalErr("The provided traverser does not map to a value: %s", op)
		}
		if v == nil {
			return nil, evalErr("traversal argument for %s step must yield an iterable type, not null", op)
		}
		l, ok := asList(v)
		if !ok {
			return nil, evalErr("traversal argument for %s step must yield an iterable type, encountered: %s", op, javaClass(v))
		}
		return l, nil
	}
	if a == nil {
		return nil, evalErr("Argument provided for %s step can't be null", op)
	}
	l, ok := asList(a)
	if !ok {
		if _, isMap := a.(*gb.Map); isMap && op == "merge" {
			return nil, evalErr("step type mismatch: expected argument to be Iterable but got Map")
		}
		return nil, evalErr("%s step can only take an array or an Iterable as an argument, encountered: %s", op, javaClass(a))
	}
	return l, nil
}

// setOf keeps the first of each group of equal values, in order.
func setOf(items ...[]any) []any {
	seen := map[any]bool{}
	var out []any
	for _, l := range items {
		for _, v := range l {
			k := canon(v)
			if seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}

func canonSet(l []any) map[any]bool {
	m := make(map[any]bool, len(l))
	for _, v := range l {
		m[canon(v)] = true
	}
	return m
}

func runListOp(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) != 1 {
		return nil, evalErr("%s() takes one argument", s.op)
	}
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		if s.op == "merge" {
			if m, ok := t.obj.(*gb.Map); ok {
				r, err := ec.mergeMaps(m, s.args[0], t)
				if err != nil {
					return nil, err
				}
				out = append(out, t.split(r))
				continue
			}
		}
		a, err := incomingList(s.op, t.obj)
		if err != nil {
			return nil, err
		}
		b, err := ec.argumentList(s.op, s.args[0], t)
		if err != nil {
			return nil, err
		}
		var r any
		switch s.op {
		case "combine":
			r = append(append(make([]any, 0, len(a)+len(b)), a...), b...)
		case "merge":
			r = &gb.Set{Items: nonNil(setOf(a, b))}
		case "difference":
			inB := canonSet(b)
			var d []any
			for _, v := range setOf(a) {
				if !inB[canon(v)] {
					d = append(d, v)
				}
			}
			r = &gb.Set{Items: nonNil(d)}
		case "intersect":
			inB := canonSet(b)
			var d []any
			for _, v := range setOf(a) {
				if inB[canon(v)] {
					d = append(d, v)
				}
			}
			r = &gb.Set{Items: nonNil(d)}
		case "disjunct":
			inA, inB := canonSet(a), canonSet(b)
			var d []any
			for _, v := range setOf(a) {
				if !inB[canon(v)] {
					d = append(d, v)
				}
			}
			for _, v := range setOf(b) {
				if !inA[canon(v)] {
					d = append(d, v)
				}
			}
			r = &gb.Set{Items: nonNil(d)}
		case "product":
			p := make([]any, 0, len(a)*len(b))
			for _, x := range a {
				for _, y := range b {
					p = append(p, []any{x, y})
				}
			}
			r = p
		}
		out = append(out, t.split(r))
	}
	return out, nil
}

func nonNil(l []any) []any {
	if l == nil {
		return []any{}
	}
	return l
}

// mergeMaps is merge() on a map traverser: the argument's entries override.
func (ec *execCtx) mergeMaps(m *gb.Map, a any, t *trav) (*gb.Map, error) {
	v := a
	if c, ok := a.(*Traversal); ok {
		r, found, err := ec.first(c, t)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, evalErr("The provided traverser does not map to a value: merge")
		}
		v = r
	}
	if v == nil {
		return nil, evalErr("Argument provided for merge step can't be null")
	}
	arg, ok := v.(*gb.Map)
	if !ok {
		return nil, evalErr("merge step expected provided argument to evaluate to a Map, encountered: %s", javaClass(v))
	}
	out := &gb.Map{Entries: append([]gb.MapEntry(nil), m.Entries...)}
	for _, e := range arg.Entries {
		replaced := false
		for i := range out.Entries {
			if equal(out.Entries[i].Key, e.Key) {
				out.Entries[i].Value = e.Value
				replaced = true
				break
			}
		}
		if !replaced {
			out.Entries = append(out.Entries, e)
		}
	}
	return out, nil
}

func runConjoin(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) != 1 {
		return nil, evalErr("conjoin() takes a delimiter")
	}
	delim, ok := s.args[0].(string)
	if !ok {
		return nil, evalErr("conjoin() takes a string delimiter")
	}
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		l, err := incomingList("conjoin", t.obj)
		if err != nil {
			return nil, err
		}
		parts := make([]string, 0, len(l))
		for _, v := range l {
			if v == nil {
				continue
			}
			if str, ok := v.(string); ok {
				parts = append(parts, str)
			} else {
				parts = append(parts, gremlinString(v))
			}
		}
		out = append(out, t.split(strings.Join(parts, delim)))
	}
	return out, nil
}

// runAnyAll keeps list traversers of which any / all elements satisfy the
// predicate; anything that is not a list is filtered.
func runAnyAll(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) != 1 {
		return nil, evalErr("%s() takes a predicate", s.op)
	}
	p, err := buildPred(s.args[0])
	if err != nil {
		return nil, err
	}
	return filter(ec, in, func(t *trav) (bool, error) {
		l, ok := asList(t.obj)
		if !ok || t.obj == nil {
			return false, nil
		}
		if s.op == "all" {
			if len(l) == 0 {
				return true, nil
			}
			for _, v := range l {
				if !p(v) {
					return false, nil
				}
			}
			return true, nil
		}
		for _, v := range l {
			if p(v) {
				return true, nil
			}
		}
		return false, nil
	})
}

func runReverse(_ *execCtx, _ *step, in []*trav) ([]*trav, error) {
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		switch x := t.obj.(type) {
		case string:
			r := []rune(x)
			for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
				r[i], r[j] = r[j], r[i]
			}
			out = append(out, t.split(string(r)))
		default:
			l, ok := asList(t.obj)
			if !ok {
				out = append(out, t)
				continue
			}
			r := make([]any, len(l))
			for i, v := range l {
				r[len(l)-1-i] = v
			}
			out = append(out, t.split(r))
		}
	}
	return out, nil
}

func runIndex(_ *execCtx, s *step, in []*trav) ([]*trav, error) {
	asMap := false
	if v, ok := s.mods().with["~tinkerpop.index.indexer"]; ok {
		if n, ok := toInt64(v); ok && n == 1 {
			asMap = true
		}
	}
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		l, ok := asList(t.obj)
		if !ok {
			l = []any{t.obj}
		}
		if asMap {
			m := &gb.Map{Entries: make([]gb.MapEntry, len(l))}
			for i, v := range l {
				m.Entries[i] = gb.MapEntry{Key: int32(i), Value: v}
			}
			out = append(out, t.split(m))
			continue
		}
		r := make([]any, len(l))
		for i, v := range l {
			r[i] = []any{v, int32(i)}
		}
		out = append(out, t.split(r))
	}
	return out, nil
}
