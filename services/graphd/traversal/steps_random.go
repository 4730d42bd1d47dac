package traversal

import (
	"math/rand/v2"

	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// coin(p) keeps each traverser with probability p; sample(n) keeps n
// traversers picked at random (weighted by the by() value when given),
// sample(local, n) n items of a list or entries of a map. Under
// SeedStrategy they draw from java.util.Random seeded as TinkerPop seeds
// them, so they give TinkerPop's answers (see seed.go for where).

func runCoin(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) != 1 {
		return nil, evalErr("coin() takes a probability")
	}
	p, ok := toFloat(s.args[0])
	if !ok {
		return nil, evalErr("coin() takes a number")
	}
	if r := ec.seeded(s); r != nil {
		// CoinStep: a draw per traverser (per unit of bulk), kept when
		// p >= the draw.
		if err := distinctInputs(in, "coin()"); err != nil {
			return nil, err
		}
		return filter(ec, in, func(*trav) (bool, error) { return p >= r.nextDouble(), nil })
	}
	return filter(ec, in, func(*trav) (bool, error) {
		switch {
		case p >= 1:
			return true, nil
		case p <= 0:
			return false, nil
		}
		return rand.Float64() < p, nil
	})
}

// pickWeighted chooses n distinct indexes, each draw proportional to the
// remaining weights.
func pickWeighted(weights []float64, n int) []int {
	idx := make([]int, 0, len(weights))
	for i, w := range weights {
		if w > 0 {
			idx = append(idx, i)
		}
	}
	var out []int
	for len(out) < n && len(idx) > 0 {
		total := 0.0
		for _, i := range idx {
			total += weights[i]
		}
		r := rand.Float64() * total
		k := len(idx) - 1
		for j, i := range idx {
			r -= weights[i]
			if r < 0 {
				k = j
				break
			}
		}
		out = append(out, idx[k])
		idx = append(idx[:k], idx[k+1:]...)
	}
	return out
}

func runSample(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	args, local := scopeLocal(s.args)
	if len(args) != 1 {
		return nil, evalErr("sample() takes a number of items")
	}
	n64, ok := toInt64(args[0])
	if !ok {
		return nil, evalErr("sample() takes an integer")
	}
	n := int(n64)
	seeded := ec.seeded(s)
	if local {
		var src randSource = mathRand{}
		if seeded != nil {
			if err := distinctInputs(in, "sample(local)"); err != nil {
				return nil, err
			}
			src = seeded
		}
		out := make([]*trav, 0, len(in))
		for _, t := range in {
			out = append(out, t.split(sampleLocal(src, t.obj, n)))
		}
		return out, nil
	}
	if seeded != nil {
		return ec.sampleSeeded(s, seeded, in, n)
	}
	w := make([]float64, len(in))
	for i, t := range in {
		w[i] = 1
		if len(s.by) > 0 {
			v, ok, err := ec.byValue(s.by[0], t)
			if err != nil {
				return nil, err
			}
			f, isNum := toFloat(v)
			if !ok || !isNum {
				w[i] = 0
				continue
			}
			w[i] = f
		}
	}
	picked := pickWeighted(w, n)
	out := make([]*trav, len(picked))
	for i, k := range picked {
		out[i] = in[k]
	}
	return out, nil
}

// sampleLocal is SampleLocalStep: a map's entries or a list's items, n of
// them drawn one by one (all of them, in their order, when there are no more
// than n); anything else passes unchanged.
func sampleLocal(src randSource, o any, n int) any {
	switch x := o.(type) {
	case *gb.Map:
		if len(x.Entries) <= n {
			return x
		}
		rest := append([]gb.MapEntry(nil), x.Entries...)
		m := &gb.Map{}
		for len(m.Entries) < n {
			i := src.nextInt(len(rest))
			m.Entries = append(m.Entries, rest[i])
			rest = append(rest[:i], rest[i+1:]...)
		}
		return m
	case []any, *gb.Set:
		l, _ := asList(x)
		if len(l) <= n {
			return x
		}
		rest := append([]any(nil), l...)
		out := make([]any, 0, n)
		for len(out) < n {
			i := src.nextInt(len(rest))
			out = append(out, rest[i])
			rest = append(rest[:i], rest[i+1:]...)
		}
		return out
	}
	return o
}
