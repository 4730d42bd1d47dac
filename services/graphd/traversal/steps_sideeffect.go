package traversal

import (
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// Side-effect steps: group, groupCount, aggregate/store, cap, sideEffect, fail.

func runSideEffect(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	c := s.args[0].(*Traversal)
	for _, t := range in {
		if _, err := ec.runChild(c, t); err != nil {
			return nil, err
		}
	}
	return in, nil
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

// sideEffectKey returns the key of group(key)/groupCount(key) ("" for the
// barrier forms).
func sideEffectKey(s *step) (string, error) {
	if len(s.args) == 0 {
		return "", nil
	}
	k, ok := s.args[0].(string)
	if len(s.args) != 1 || !ok {
		return "", evalErr("%s() takes one side-effect key", s.op)
	}
	return k, nil
}

func runGroupCount(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	key, err := sideEffectKey(s)
	if err != nil {
		return nil, err
	}
	o := newOmap()
	if key != "" {
		// groupCount(key): the traversers pass; the counts add up in the side effect.
		switch prev := ec.sideEffects[key].(type) {
		case nil:
		case *gb.Map:
			for _, e := range prev.Entries {
				*o.slot(e.Key) = e.Value
			}
		default:
			return nil, evalErr("groupCount('%s'): the side effect holds %s, not a map", key, describe(prev))
		}
	}
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
	if key != "" {
		ec.sideEffects[key] = o.m
		return in, nil
	}
	return []*trav{fresh(o.m)}, nil
}

func runGroup(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	key, err := sideEffectKey(s)
	if err != nil {
		return nil, err
	}
	if key == "" {
		m, err := ec.groupOf(s, in)
		if err != nil {
			return nil, err
		}
		return []*trav{fresh(m)}, nil
	}
	// group(key): the traversers pass; the side effect is the grouping of
	// every traverser that reached this step so far.
	if ec.groupMembers == nil {
		ec.groupMembers = map[*step][]*trav{}
	}
	ec.groupMembers[s] = append(ec.groupMembers[s], in...)
	m, err := ec.groupOf(s, ec.groupMembers[s])
	if err != nil {
		return nil, err
	}
	ec.sideEffects[key] = m
	return in, nil
}

func (ec *execCtx) groupOf(s *step, in []*trav) (*gb.Map, error) {
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
	if vt, ok := valBy.(*Traversal); ok && ec.hasSeed && hasSeedable(vt, 0) {
		// TinkerPop runs the value traversal's seeded steps per key in
		// its HashMap's order; the map's order is graphd's insertion order.
		keys := make([]any, len(buckets))
		for i, b := range buckets {
			keys[i] = b.key
		}
		order, ok := javaHashMapOrder(keys)
		if !ok {
			return nil, evalErr("SeedStrategy: group() keys of these types with coin()/sample() in the value traversal are not supported by graphd")
		}
		m := &gb.Map{Entries: make([]gb.MapEntry, 0, len(buckets))}
		vals := make([]any, len(buckets))
		has := make([]bool, len(buckets))
		for _, i := range order {
			r, err := ec.run(vt, buckets[i].members)
			if err != nil {
				return nil, err
			}
			if len(r) > 0 {
				vals[i], has[i] = r[0].obj, true
			}
		}
		for i, b := range buckets {
			if has[i] {
				m.Entries = append(m.Entries, gb.MapEntry{Key: b.key, Value: vals[i]})
			}
		}
		return m, nil
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
			// GroupStep's final reduction: a value traversal (other than the
			// by(key)/by(token) forms, which fold) gives its first result,
			// after its barrier or, without one, the first value it
			// produced; nothing means no entry.
			if len(r) == 0 {
				continue
			}
			v = r[0].obj
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
	return m, nil
}

var barrierSteps = map[string]bool{"count": true, "fold": true, "sum": true, "min": true, "max": true, "mean": true, "group": true, "groupCount": true}

func runAggregate(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	args, _ := scopeLocal(s.args)
	if len(args) != 1 {
		return nil, evalErr("%s() takes a side-effect key", s.op)
	}
	key, ok := args[0].(string)
	if !ok {
		return nil, evalErr("%s() takes a side-effect key", s.op)
	}
	if op, ok := ec.sideEffectOps[key]; ok {
		return ec.aggregateWithOp(s, key, op, in)
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
		if ec.declaredMaps[k] {
			return &gb.Map{}
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

// sideEffectOps are the Operator values withSideEffect(key, value, operator)
// accepts.
var sideEffectOps = map[string]bool{"sum": true, "minus": true, "mult": true, "div": true, "min": true,
	"max": true, "and": true, "or": true, "addAll": true, "assign": true}

// aggregateWithOp is aggregate()/store() into a side effect declared with an
// operator: each value is folded into the side effect with the operator;
// addAll appends, and assign replaces the side effect with the collected
// values (global scope) or with each value in turn (local scope).
func (ec *execCtx) aggregateWithOp(s *step, key, op string, in []*trav) ([]*trav, error) {
	_, local := scopeLocal(s.args)
	var vals []any
	for _, t := range in {
		v, ok, err := ec.applyBy(s, 0, t.obj, t)
		if err != nil {
			return nil, err
		}
		if ok {
			for j := int64(0); j < t.n(); j++ {
				vals = append(vals, v)
			}
		}
	}
	cur := ec.sideEffects[key]
	switch op {
	case "assign":
		if local {
			if len(vals) > 0 {
				cur = vals[len(vals)-1]
			}
		} else {
			cur = append([]any{}, vals...)
		}
	case "addAll":
		l, ok := asList(cur)
		if !ok && cur != nil {
			return nil, evalErr("%s('%s'): Operator.addAll needs a list side effect, got %s", s.op, key, describe(cur))
		}
		cur = append(append([]any{}, l...), vals...)
	default:
		for _, v := range vals {
			r, err := applyOperator(op, cur, v)
			if err != nil {
				return nil, evalErr("%s('%s'): %v", s.op, key, err)
			}
			cur = r
		}
	}
	ec.sideEffects[key] = cur
	return in, nil
}

func applyOperator(op string, a, b any) (any, error) {
	switch op {
	case "and", "or":
		x, ok1 := a.(bool)
		y, ok2 := b.(bool)
		if !ok1 || !ok2 {
			return nil, evalErr("Operator.%s takes booleans", op)
		}
		if op == "and" {
			return x && y, nil
		}
		return x || y, nil
	case "min", "max":
		return numMinMax(op, a, b)
	}
	if !isNumber(a) || !isNumber(b) {
		return nil, evalErr("Operator.%s takes numbers", op)
	}
	return arith(op, a, b)
}

// foldOperator applies an Operator for fold(seed, operator): addAll adds a
// list's items to a list or a map's entries to a map, assign takes the new
// value, the others as applyOperator.
func foldOperator(op string, acc, v any) (any, error) {
	switch op {
	case "assign":
		return v, nil
	case "addAll":
		switch a := acc.(type) {
		case *gb.Map:
			m, ok := v.(*gb.Map)
			if !ok {
				return nil, evalErr("fold(map, Operator.addAll) takes maps, got %s", describe(v))
			}
			out := &gb.Map{Entries: append([]gb.MapEntry(nil), a.Entries...)}
			for _, e := range m.Entries {
				replaced := false
				for i := range out.Entries {
					if equal(out.Entries[i].Key, e.Key) {
						out.Entries[i].Value, replaced = e.Value, true
						break
					}
				}
				if !replaced {
					out.Entries = append(out.Entries, e)
				}
			}
			return out, nil
		default:
			l, ok := asList(acc)
			if !ok {
				return nil, evalErr("fold(seed, Operator.addAll) needs a list or map seed, got %s", describe(acc))
			}
			add, ok := asList(v)
			if !ok {
				add = []any{v}
			}
			return append(append([]any{}, l...), add...), nil
		}
	}
	return applyOperator(op, acc, v)
}
