package traversal

import (
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// Filter steps: has*, is, dedup, range/limit/tail, simplePath/cyclicPath, where, not/and/or, filter.

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
	if len(args) > 0 && len(args) <= 2 && args[0] == nil {
		// a null key names no property: nothing has it
		return nil, nil
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
	valArg := args[1]
	if k, ok := args[0].(gb.Enum); ok && k.Type == gb.TypeT && k.Name == "id" {
		// has(T.id, "10") finds the element with the numeric id 10, as
		// hasId() and V(ids) do (TinkerGraph's numeric id managers convert it).
		if n, ok := numericString(valArg); ok {
			valArg = &gb.P{Op: "within", Values: []any{valArg, n}}
		}
	}
	test, err := ec.valueTest(valArg)
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
		if s.op == "hasId" {
			// A numeric id given as a string also matches the number
			// (TinkerGraph's numeric id managers convert it the same way).
			for _, v := range vals {
				if n, ok := numericString(v); ok {
					vals = append(vals, n)
				}
			}
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
	cmp, _ := s.args[0].(*gb.P)
	return filter(ec, in, func(t *trav) (bool, error) {
		ok := p(t.obj)
		if !ok && cmp != nil && comparisonError(cmp, t.obj) {
			ec.typeErrs++
		}
		return ok, nil
	})
}

// comparisonError reports whether p is an ordering comparison (lt, lte, gt,
// gte) whose operands are not comparable (NaN, or different types):
// TinkerPop's ERROR value of its ternary boolean logic.
func comparisonError(p *gb.P, v any) bool {
	switch p.Op {
	case "lt", "lte", "gt", "gte":
	default:
		return false
	}
	if p.Text || len(p.Values) != 1 {
		return false
	}
	_, ok := compare(v, p.Values[0])
	return !ok
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

func runDedup(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	args, local := scopeLocal(s.args)
	// dedup(labels...): the duplicates are traversers whose labelled
	// objects (each through the by() modulator) are all equal; a label no
	// scope holds is an error, a by() that produces nothing filters.
	// dedup(local, labels...) ignores the labels, as TinkerPop does.
	var labels []string
	for _, a := range args {
		l, ok := a.(string)
		if !ok {
			return nil, evalErr("dedup() takes step labels (strings), got %s", describe(a))
		}
		labels = append(labels, l)
	}
	var by any
	if len(s.by) > 0 {
		by = s.by[0]
	}
	if local {
		out := make([]*trav, 0, len(in))
		// dedup(local) is a Set (TinkerPop's DedupLocalStep: a
		// LinkedHashSet of what the object iterates: a collection's or a
		// path's items, a map's entries, else the object itself).
		for _, t := range in {
			l, ok := asList(t.obj)
			if m, isMap := t.obj.(*gb.Map); isMap {
				l, ok = make([]any, len(m.Entries)), true
				for i, e := range m.Entries {
					l[i] = mapEntry{e.Key, e.Value}
				}
			}
			if !ok {
				l = []any{t.obj}
			}
			seen := map[any]bool{}
			r := []any{}
			for _, e := range l {
				k := canon(e)
				if !seen[k] {
					seen[k] = true
					r = append(r, e)
				}
			}
			out = append(out, t.split(&gb.Set{Items: r}))
		}
		return out, nil
	}
	seen := ec.dedupSeen[s]
	if seen == nil {
		seen = map[any]bool{}
	}
	out, err := filter(ec, in, func(t *trav) (bool, error) {
		var v any
		if len(labels) == 0 {
			var ok bool
			var err error
			v, ok, err = ec.byValue(by, t)
			if err != nil || !ok {
				return false, err
			}
		} else {
			objs := make([]any, len(labels))
			for i, l := range labels {
				o, found := ec.scopeValue(t, l)
				if !found {
					return false, evalErr("dedup(): neither the map, the side effects nor the path has a label %s", l)
				}
				o, ok, err := ec.byValue(by, t.split(o))
				if err != nil || !ok {
					return false, err
				}
				objs[i] = o
			}
			v = objs
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

func runFilter(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	c := s.args[0].(*Traversal)
	return filter(ec, in, func(t *trav) (bool, error) {
		r, err := ec.runChild(c, t)
		return len(r) > 0, err
	})
}

func runNot(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	c := s.args[0].(*Traversal)
	return filter(ec, in, func(t *trav) (bool, error) {
		before := ec.typeErrs
		r, err := ec.runChild(c, t)
		if len(r) == 0 && ec.typeErrs > before {
			// TinkerPop's ternary logic: a comparison that is an error
			// (NaN, incomparable types) inside not() stays an error, which
			// filters the traverser; not(ERROR) is not true.
			return false, err
		}
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

// pathRange cuts a path to the part between the from() and to() labels
// (inclusive; the whole path when they are not given).
func pathRange(s *step, nodes []*pnode) []*pnode {
	lo, hi := 0, len(nodes)
	m := s.mods()
	has := func(n *pnode, l any) bool {
		ls, _ := l.(string)
		for _, x := range n.labels {
			if x == ls {
				return true
			}
		}
		return false
	}
	if m.hasFrom {
		lo = len(nodes)
		for i, n := range nodes {
			if has(n, m.from) {
				lo = i
				break
			}
		}
	}
	if m.hasTo {
		hi = lo
		for i := len(nodes) - 1; i >= lo; i-- {
			if has(nodes[i], m.to) {
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
			if err != nil || !ok {
				// A by() that produces nothing filters the traverser.
				return false, err
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
				} else if ec.declared[x] {
					// a side-effect key an aggregate()/store() of this
					// traversal fills, before its first value: empty
					sel, ok = []any{}, true
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
		// The by() modulators form a ring: the start value takes the first,
		// each step label of the predicate (in order) the next
		// (WherePredicateStep's TraversalRing).
		ring := 0
		rp, ok, err := ec.whereP(p, t, func(v any) (any, bool, error) { ring++; return ec.applyBy(s, ring, v, t) })
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
