package traversal

import (
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// Branch steps: coalesce, optional, union, local, choose, repeat.

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

// globalSteps make a branch see every traverser routed to it at once (their
// state spans traversers in TinkerPop: one option traversal serves them all).
var globalSteps = map[string]bool{"count": true, "fold": true, "sum": true, "min": true, "max": true, "mean": true,
	"group": true, "groupCount": true, "order": true, "dedup": true, "range": true, "limit": true, "tail": true,
	"skip": true, "barrier": true, "sample": true, "cap": true}

func isGlobalBranch(b any) bool {
	c, ok := b.(*Traversal)
	if !ok {
		return false
	}
	for _, st := range c.steps {
		if _, local := scopeLocal(st.args); globalSteps[st.op] && !local {
			return true
		}
	}
	return false
}

// runChoose implements choose() and branch(): each traverser goes to the
// branch its condition or key picks (branch(): every matching option;
// choose(): the first); Pick.any options take every traverser, Pick.none
// those no option matched; with no match and no Pick.none the traverser is
// filtered. A branch with a barrier or a stateful filter gets all its
// traversers at once.
func runChoose(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	type route struct {
		t  *trav
		b  any
		id int
	}
	var routes []route
	options := s.mods().options
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
			if cond {
				routes = append(routes, route{t, arg(1), 1})
			} else {
				routes = append(routes, route{t, arg(2), 2})
			}
			continue
		}
		if len(s.args) != 1 {
			return nil, evalErr("%s() takes 1 to 3 arguments", s.op)
		}
		c, ok := s.args[0].(*Traversal)
		if !ok {
			return nil, evalErr("%s() takes a traversal", s.op)
		}
		key, has, err := ec.first(c, t)
		if err != nil {
			return nil, err
		}
		matched := false
		noneAt := -1
		for i, opt := range options {
			if len(opt) != 2 {
				return nil, evalErr("option() takes a key and a traversal")
			}
			if e, ok := opt[0].(gb.Enum); ok && e.Type == gb.TypePick {
				switch e.Name {
				case "none":
					noneAt = i
				case "any":
					routes = append(routes, route{t, opt[1], 10 + i})
				}
				continue
			}
			// branch() takes every matching option, choose() the first.
			if !has || (matched && s.op != "branch") {
				continue
			}
			hit := false
			switch k := opt[0].(type) {
			case *gb.P:
				pp, err := buildP(k)
				if err != nil {
					return nil, err
				}
				hit = pp(key)
			case *Traversal:
				r, err := ec.runChild(k, t.split(key))
				if err != nil {
					return nil, err
				}
				hit = len(r) > 0
			default:
				hit = equal(key, opt[0])
			}
			if hit {
				matched = true
				routes = append(routes, route{t, opt[1], 10 + i})
			}
		}
		if !matched && noneAt >= 0 {
			routes = append(routes, route{t, options[noneAt][1], 10 + noneAt})
		}
	}
	for _, r := range routes {
		switch r.b.(type) {
		case *Traversal, nil:
		default:
			return nil, evalErr("%s() branches must be traversals", s.op)
		}
	}
	global := false
	for _, r := range routes {
		global = global || isGlobalBranch(r.b)
	}
	var out []*trav
	if !global {
		for _, r := range routes {
			if r.b == nil {
				out = append(out, r.t)
				continue
			}
			res, err := ec.runChild(r.b.(*Traversal), r.t)
			if err != nil {
				return nil, err
			}
			out = append(out, res...)
			if err := ec.checkSize(len(out)); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	var order []int
	groups := map[int][]route{}
	for _, r := range routes {
		if _, ok := groups[r.id]; !ok {
			order = append(order, r.id)
		}
		groups[r.id] = append(groups[r.id], r)
	}
	for _, id := range order {
		g := groups[id]
		travs := make([]*trav, len(g))
		for i, r := range g {
			travs[i] = r.t
		}
		if g[0].b == nil {
			out = append(out, travs...)
			continue
		}
		res, err := ec.run(g[0].b.(*Traversal), travs)
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func runRepeat(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	body := s.args[0].(*Traversal)
	m := s.mods()
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
		n.loopNames = append(append([]string(nil), t.loopNames...), m.loopName)
		n.loops = 0
		cur = append(cur, &n)
	}
	exit := func(t *trav) *trav {
		n := *t
		if k := len(t.loopStack); k > 0 {
			n.loops = t.loopStack[k-1]
			n.loopStack = t.loopStack[:k-1]
			n.loopNames = t.loopNames[:k-1]
		}
		return &n
	}
	// checks before the first iteration
	if m.untilPre || m.emitPre {
		var next []*trav
		for _, t := range cur {
			if m.untilPre && m.until != nil {
				ok, err := test(m.until, t)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, exit(t))
					continue
				}
			}
			if m.emitPre && m.hasEmit {
				ok, err := test(m.emit, t)
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
	if m.timesPre && m.times <= 0 {
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
			if m.hasTimes && t.loops >= m.times {
				out = append(out, exit(t))
				continue
			}
			if !m.untilPre && m.until != nil {
				ok, err := test(m.until, t)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, exit(t))
					continue
				}
			}
			if m.untilPre && m.until != nil {
				ok, err := test(m.until, t)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, exit(t))
					continue
				}
			}
			if m.hasEmit {
				ok, err := test(m.emit, t)
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
		if m.until == nil && !m.hasTimes && !m.hasEmit {
			// repeat() with no exit condition: every traverser loops forever
			// unless the body stops producing; bounded by time and result limits.
			continue
		}
	}
	return out, nil
}
