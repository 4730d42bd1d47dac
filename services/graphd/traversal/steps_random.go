package traversal

import (
	"math/rand/v2"

	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// coin(p) keeps each traverser with probability p; sample(n) keeps n
// traversers picked at random (weighted by the by() value when given),
// sample(local, n) n items of a list. SeedStrategy (a reproducible Java
// random sequence) is not supported, so these answers are random.

func runCoin(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) != 1 {
		return nil, evalErr("coin() takes a probability")
	}
	p, ok := toFloat(s.args[0])
	if !ok {
		return nil, evalErr("coin() takes a number")
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
	if local {
		out := make([]*trav, 0, len(in))
		for _, t := range in {
			l, ok := asList(t.obj)
			if !ok {
				out = append(out, t)
				continue
			}
			w := make([]float64, len(l))
			for i := range w {
				w[i] = 1
			}
			picked := pickWeighted(w, n)
			r := make([]any, 0, len(picked))
			for _, i := range picked {
				r = append(r, l[i])
			}
			if _, isSet := t.obj.(*gb.Set); isSet {
				out = append(out, t.split(&gb.Set{Items: r}))
			} else {
				out = append(out, t.split(r))
			}
		}
		return out, nil
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
