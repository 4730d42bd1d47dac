package traversal

import (
	"fmt"

	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// Sacks (TinkerPop's withSack, sack(), barrier() merging).
//
//   - withSack(value[, Operator]): every traverser a start step (or a
//     reducing step) creates carries value in its sack; a traverser's
//     children carry its sack on. The Operator merges the sacks of
//     traversers that a barrier() merges. withSack's split operators and
//     suppliers are lambdas and refused.
//   - sack(): the traverser's sack. sack(Operator).by(x): the sack becomes
//     Operator(sack, x) (by() default: the current object; a by() that
//     produces nothing filters the traverser).
//   - barrier() (and barrier(Barrier.normSack)) merges equal traversers (the
//     same object, the same loops) when their sacks can be merged (a merge
//     Operator was given) or carry none, adding their bulks (withBulk(false):
//     the merged traverser counts once). normSack then sets each sack to
//     sack*bulk / (the sum of sack*bulk over the barrier).

// withSack reads withSack's arguments.
func (t *Traversal) withSack(args []any) error {
	if len(args) == 0 || len(args) > 2 {
		return evalErr("withSack() takes an initial value and optionally a merge Operator")
	}
	switch args[0].(type) {
	case *gb.Lambda:
		return evalErr("withSack() with a lambda supplier is not supported by graphd")
	case *gb.Bytecode:
		return evalErr("withSack() takes a value, not a traversal")
	}
	t.sackInit, t.hasSackInit = args[0], true
	if len(args) == 2 {
		op, ok := args[1].(gb.Enum)
		if !ok || op.Type != gb.TypeOperator || !sideEffectOps[op.Name] {
			return evalErr("withSack(value, %s): graphd supports a merge Operator (Operator.sum, minus, mult, div, min, max, and, or, addAll, assign); split operators and lambdas are not supported", describe(args[1]))
		}
		t.sackMerge = op.Name
	}
	return nil
}

// giveSacks gives the initial sack to traversers that have none yet.
func (ec *execCtx) giveSacks(out []*trav) {
	for i, tr := range out {
		if !tr.hasSack {
			c := *tr
			c.sack, c.hasSack = ec.sackInit, true
			out[i] = &c
		}
	}
}

func runSack(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) == 0 {
		if len(s.by) > 0 {
			return nil, evalErr("sack() without an operator takes no by() modulator")
		}
		out := make([]*trav, len(in))
		for i, t := range in {
			out[i] = t.split(t.sack)
		}
		return out, nil
	}
	op, ok := s.args[0].(gb.Enum)
	if len(s.args) != 1 || !ok || op.Type != gb.TypeOperator || !sideEffectOps[op.Name] {
		return nil, evalErr("sack(operator) takes an Operator (lambdas are not supported by graphd), got %s", describe(s.args[0]))
	}
	if len(s.by) > 1 {
		return nil, evalErr("sack(%s) takes one by() modulator", op.Name)
	}
	var by any
	if len(s.by) == 1 {
		by = s.by[0]
	}
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		v, ok, err := ec.byValue(by, t)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		r, err := foldOperator(op.Name, t.sack, v)
		if err != nil {
			return nil, evalErr("sack(%s): %v", op.Name, err)
		}
		c := *t
		c.sack, c.hasSack = r, true
		out = append(out, &c)
	}
	return out, nil
}

type barrierKey struct {
	typ   string
	obj   any
	loops int
	stack string
}

func runBarrier(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	norm := false
	for _, a := range s.args {
		switch x := a.(type) {
		case gb.Enum:
			if x.Name != "normSack" {
				return nil, evalErr("barrier(%s) is not supported by graphd", x.Name)
			}
			norm = true
		case *gb.Lambda:
			return nil, evalErr("barrier() with a lambda is not supported by graphd")
		default:
			if _, ok := toInt64(a); !ok {
				return nil, evalErr("barrier() takes a size or Barrier.normSack, got %s", describe(a))
			}
		}
	}
	sacks := false
	for _, t := range in {
		if t.hasSack && t.sack != nil {
			sacks = true
			break
		}
	}
	// Without sacks to merge (and counting every traverser) merging changes
	// nothing graphd shows.
	merge := (sacks && ec.sackMerge != "") || ec.oneBulk
	out := in
	if merge {
		if ec.readsPaths {
			return nil, evalErr("barrier() merging traversers (withSack(value, operator) or withBulk(false)) in a traversal that reads paths or step labels is not supported by graphd")
		}
		var err error
		if out, err = ec.mergeForBarrier(in); err != nil {
			return nil, err
		}
	}
	if norm {
		return normSack(out)
	}
	return out, nil
}

// mergeForBarrier merges equal traversers whose sacks can be merged.
func (ec *execCtx) mergeForBarrier(in []*trav) ([]*trav, error) {
	idx := map[barrierKey]int{}
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		if t.hasSack && t.sack != nil && ec.sackMerge == "" {
			out = append(out, t) // an unmergeable sack: the traverser stays apart
			continue
		}
		k := barrierKey{typ: fmt.Sprintf("%T", t.obj), obj: canon(t.obj), loops: t.loops}
		if len(t.loopStack) > 0 {
			k.stack = fmt.Sprint(t.loopStack, t.loopNames)
		}
		i, seen := idx[k]
		if !seen {
			idx[k] = len(out)
			c := *t
			out = append(out, &c)
			continue
		}
		m := out[i]
		if !ec.oneBulk {
			m.bulk = m.n() + t.n()
		}
		if m.hasSack && m.sack != nil {
			r, err := foldOperator(ec.sackMerge, m.sack, t.sack)
			if err != nil {
				return nil, evalErr("withSack(value, %s): merging sacks: %v", ec.sackMerge, err)
			}
			m.sack = r
		}
	}
	return out, nil
}

// normSack is Barrier.normSack.
func normSack(in []*trav) ([]*trav, error) {
	var total any = 0.0
	for _, t := range in {
		if !isNumber(t.sack) {
			return nil, evalErr("barrier(normSack) needs numeric sacks, got %s", describe(t.sack))
		}
		p, err := numOp("*", t.sack, t.n(), false)
		if err != nil {
			return nil, err
		}
		if total, err = numOp("+", total, p, false); err != nil {
			return nil, err
		}
	}
	out := make([]*trav, len(in))
	for i, t := range in {
		p, err := numOp("*", t.sack, t.n(), false)
		if err != nil {
			return nil, err
		}
		r, err := numOp("/", p, total, false)
		if err != nil {
			return nil, err
		}
		c := *t
		c.sack = r
		out[i] = &c
	}
	return out, nil
}
