package traversal

import (
	"math"
	"math/rand/v2"
	"reflect"
	"sort"

	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// SeedStrategy: TinkerPop gives each coin()/sample() step its own
// java.util.Random seeded with the strategy's seed; the answers then depend
// on the order in which traversers reach the step and on how TinkerPop
// bulks them. graphd reproduces them where its order is TinkerPop's: the
// seeded steps may follow only the steps in seedPrefix, in traversals that
// are run per traverser (local(), where(), by() ...) or as a group() value
// (after its first barrier; keys of Java-hashable types, evaluated in
// HashMap order), never inside repeat(); coin() and sample(local) refuse
// equal incoming traversers (TinkerPop may have bulked them), sample()
// merges equal objects as TinkerPop's TraverserSet does and refuses
// traversals that read paths or use sacks. Everything else under
// SeedStrategy is refused with a sentence.

// javaRandom is java.util.Random.
type javaRandom struct{ seed uint64 }

const javaRandomMask = 1<<48 - 1

func newJavaRandom(seed int64) *javaRandom {
	return &javaRandom{seed: (uint64(seed) ^ 0x5DEECE66D) & javaRandomMask}
}

func (r *javaRandom) next(bits uint) int32 {
	r.seed = (r.seed*0x5DEECE66D + 0xB) & javaRandomMask
	return int32(uint32(r.seed >> (48 - bits)))
}

func (r *javaRandom) nextDouble() float64 {
	return float64(int64(r.next(26))<<27+int64(r.next(27))) * (1.0 / (1 << 53))
}

func (r *javaRandom) nextInt(bound int) int {
	b := int32(bound)
	x := r.next(31)
	m := b - 1
	if b&m == 0 {
		return int((int64(b) * int64(x)) >> 31)
	}
	for u := x; ; u = r.next(31) {
		x = u % b
		if u-x+m >= 0 { // int overflow as in Java
			return int(x)
		}
	}
}

type randSource interface {
	nextInt(n int) int
}

type mathRand struct{}

func (mathRand) nextInt(n int) int { return rand.IntN(n) }

// seeded returns the step's seeded random source, nil without SeedStrategy.
func (ec *execCtx) seeded(s *step) *javaRandom {
	if !ec.hasSeed {
		return nil
	}
	if ec.randoms == nil {
		ec.randoms = map[*step]*javaRandom{}
	}
	r := ec.randoms[s]
	if r == nil {
		r = newJavaRandom(ec.seed)
		ec.randoms[s] = r
	}
	return r
}

// distinctInputs refuses equal incoming traversers (or a bulk): where
// TinkerPop bulks them is up to its strategies, and a bulk changes the
// order of draws.
func distinctInputs(in []*trav, what string) error {
	seen := make(map[any]bool, len(in))
	for _, t := range in {
		k := canon(t.obj)
		if t.bulk > 1 || seen[k] {
			return evalErr("SeedStrategy: %s over equal traversers is not supported by graphd (TinkerPop's bulking decides the order of its draws)", what)
		}
		seen[k] = true
	}
	return nil
}

// javaEquals is Object.equals for the values graphd keeps: numbers of the
// same type and value, elements by identity, the rest as gb.Equal.
func javaEquals(a, b any) bool {
	switch a.(type) {
	case int8, int16, int32, int64, float32, float64, uint8:
		return sameType(a, b) && a == b
	}
	return gb.Equal(a, b)
}

func sameType(a, b any) bool { return reflect.TypeOf(a) == reflect.TypeOf(b) }

// sampleSeeded is SampleGlobalStep under SeedStrategy: equal objects merge
// into one entry with a bulk (TraverserSet), each weighted by by() (1 without
// it; a by() that produces nothing drops the traverser), then TinkerPop's
// weighted draw without replacement.
func (ec *execCtx) sampleSeeded(s *step, r *javaRandom, in []*trav, n int) ([]*trav, error) {
	if ec.readsPaths || ec.hasSackInit {
		return nil, evalErr("SeedStrategy: sample() in a traversal that reads paths or sacks is not supported by graphd")
	}
	type entry struct {
		t    *trav
		bulk int64
		w    float64
	}
	var set []*entry
	byCanon := map[any][]*entry{}
	total := int64(0)
	for _, t := range in {
		w := 1.0
		if len(s.by) > 0 {
			v, ok, err := ec.byValue(s.by[0], t)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			f, isNum := toFloat(v)
			if !isNum {
				return nil, evalErr("Traverser %s does not evaluate to a number with the sample() by()", gremlinString(t.obj))
			}
			w = f
		}
		total += t.n()
		k := canon(t.obj)
		var e *entry
		for _, c := range byCanon[k] {
			if javaEquals(c.t.obj, t.obj) {
				e = c
				break
			}
		}
		if e != nil {
			e.bulk += t.n()
			continue
		}
		e = &entry{t: t, bulk: t.n(), w: w}
		byCanon[k] = append(byCanon[k], e)
		set = append(set, e)
	}
	if total <= int64(n) {
		out := make([]*trav, 0, len(set))
		for _, e := range set {
			c := *e.t
			c.bulk = e.bulk
			out = append(out, &c)
		}
		return out, nil
	}
	totalWeight := 0.0
	for _, e := range set {
		totalWeight += e.w * float64(e.bulk)
	}
	sampled := map[*entry]int64{}
	var order []*entry
	taken := 0
	for taken < n {
		reSample := false
		running := totalWeight
		for _, e := range set {
			sb := sampled[e]
			if sb >= e.bulk {
				continue
			}
			for i := int64(0); i < e.bulk-sb; i++ {
				if r.nextDouble() <= e.w/running {
					if sampled[e] == 0 {
						order = append(order, e)
					}
					sampled[e]++
					taken++
					reSample = true
					break
				}
				running -= e.w
			}
			if reSample || taken >= n {
				break
			}
		}
		if !reSample {
			// a pass may draw nothing (sampled entries keep their weight in
			// the running total); only weights that are all 0 never draw
			left := 0.0
			for _, e := range set {
				if sampled[e] < e.bulk {
					left += e.w
				}
			}
			if !(left > 0) {
				return nil, evalErr("sample(): the weights of the traversers left to sample are all 0")
			}
			if err := ec.tick(); err != nil {
				return nil, err
			}
		}
	}
	out := make([]*trav, 0, len(order))
	for _, e := range order {
		c := *e.t
		c.bulk = sampled[e]
		out = append(out, &c)
	}
	return out, nil
}

// seedPrefix are the steps a seeded coin()/sample() may follow (and the
// step holding its traversal may follow) in any traversal above it.
var seedPrefix = map[string]bool{
	"V": true, "E": true, "has": true, "hasLabel": true, "hasId": true, "hasNot": true, "hasKey": true, "hasValue": true,
	"is": true, "out": true, "in": true, "both": true, "outE": true, "inE": true, "bothE": true, "outV": true, "inV": true,
	"otherV": true, "bothV": true, "values": true, "properties": true, "valueMap": true, "elementMap": true, "id": true,
	"label": true, "key": true, "value": true, "constant": true, "identity": true, "order": true, "limit": true,
	"range": true, "skip": true, "tail": true, "dedup": true, "fold": true, "unfold": true, "count": true, "sum": true,
	"min": true, "max": true, "mean": true, "select": true, "project": true, "where": true, "not": true, "and": true,
	"or": true, "filter": true, "map": true, "flatMap": true, "local": true, "group": true, "groupCount": true,
	"coin": true, "sample": true, "element": true, "inject": true,
}

// seedChildren are the steps whose traversals run per traverser, in the
// order the traversers arrive (group: its value traversal per key).
var seedChildren = map[string]bool{"local": true, "map": true, "flatMap": true, "filter": true, "where": true,
	"not": true, "and": true, "or": true, "project": true, "select": true, "order": true, "group": true,
	"groupCount": true, "sample": true, "dedup": true}

func isSeedable(s *step) bool { return s.op == "coin" || s.op == "sample" }

func hasSeedable(t *Traversal, depth int) bool {
	if t == nil || depth > 100 {
		return false
	}
	for _, s := range t.steps {
		if isSeedable(s) {
			return true
		}
		if s.anyChild(func(c *Traversal) bool { return hasSeedable(c, depth+1) }) {
			return true
		}
	}
	return false
}

// checkSeeded refuses the places where a seeded coin()/sample() would not
// draw in TinkerPop's order.
func checkSeeded(t *Traversal, depth int) error {
	refuse := func(why string) error {
		return evalErr("SeedStrategy: coin()/sample() %s is not supported by graphd", why)
	}
	for i, s := range t.steps {
		prefixOK := true
		for _, p := range t.steps[:i] {
			if !seedPrefix[p.op] {
				prefixOK = false
				break
			}
		}
		if isSeedable(s) && !prefixOK {
			return refuse("after a step other than the simple map/filter steps")
		}
		var err error
		s.anyChild(func(c *Traversal) bool {
			if !hasSeedable(c, depth+1) {
				return false
			}
			switch {
			case !seedChildren[s.op]:
				err = refuse("inside " + s.op + "()")
			case !prefixOK:
				err = refuse("inside a step that follows a step other than the simple map/filter steps")
			case s.op == "group" && len(s.by) > 1 && s.by[1] == any(c) && seedBeforeBarrier(c):
				err = refuse("before the first barrier of a group() value traversal")
			default:
				err = checkSeeded(c, depth+1)
			}
			return err != nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// seedBeforeBarrier: a seeded step comes before the traversal's first
// barrier (TinkerPop runs that part per traverser, not per group key).
func seedBeforeBarrier(t *Traversal) bool {
	for _, s := range t.steps {
		if s.op == "sample" {
			if _, local := scopeLocal(s.args); !local {
				return false // sample() is itself the first barrier
			}
		}
		if isSeedable(s) || s.anyChild(func(c *Traversal) bool { return hasSeedable(c, 0) }) {
			return true
		}
		switch s.op {
		case "count", "sum", "min", "max", "mean", "fold", "group", "groupCount", "order", "barrier", "cap":
			return false
		case "dedup", "tail", "aggregate", "tree":
			return true // barriers whose place in TinkerPop's plan graphd does not follow
		}
	}
	return false
}

// javaHashCode is hashCode() of the key types a seeded group() orders by.
func javaHashCode(k any) (int32, bool) {
	switch x := k.(type) {
	case nil:
		return 0, true
	case string:
		var h int32
		for _, c := range x {
			if c > 0xFFFF {
				c -= 0x10000
				h = 31*h + int32(0xD800+(c>>10))
				h = 31*h + int32(0xDC00+(c&0x3FF))
				continue
			}
			h = 31*h + int32(c)
		}
		return h, true
	case int32:
		return x, true
	case int64:
		return int32(x ^ int64(uint64(x)>>32)), true
	case bool:
		if x {
			return 1231, true
		}
		return 1237, true
	case float64:
		b := math.Float64bits(x)
		if x != x {
			b = 0x7ff8000000000000
		}
		return int32(b ^ b>>32), true
	case *graph.Vertex:
		return javaHashCode(x.ID)
	case *graph.Edge:
		return javaHashCode(x.ID)
	}
	return 0, false
}

// javaHashMapOrder orders keys as a java.util.HashMap (default capacity)
// iterates them; ok is false for a key type without a known hashCode.
func javaHashMapOrder(keys []any) ([]int, bool) {
	capacity := 16
	for len(keys) > capacity*3/4 {
		capacity *= 2
	}
	type e struct{ bucket, i int }
	es := make([]e, len(keys))
	for i, k := range keys {
		h, ok := javaHashCode(k)
		if !ok {
			return nil, false
		}
		u := uint32(h)
		u ^= u >> 16
		es[i] = e{bucket: int(u & uint32(capacity-1)), i: i}
	}
	sort.SliceStable(es, func(a, b int) bool { return es[a].bucket < es[b].bucket })
	out := make([]int, len(es))
	for i, x := range es {
		out[i] = x.i
	}
	return out, true
}
