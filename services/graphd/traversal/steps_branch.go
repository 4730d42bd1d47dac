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
