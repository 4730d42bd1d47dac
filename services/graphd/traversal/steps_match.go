package traversal

import (
	"sort"
	"strings"

	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// match() as TinkerPop's MatchStep (standard engine, CountMatchAlgorithm):
// each pattern traversal starts at the object its start label (as('a')) is
// bound to on the traverser's path and, when it ends with a label, must end on
// the object already bound to that label or binds it. A traverser runs every
// pattern once (and()) or any one (or()), one after the other in the order
// TinkerPop picks; what comes out is the map of the match's start and end
// labels to their (last) bound objects. Patterns starting with where()/not()
// filter; and()/or() patterns are nested matches.

type patternKind int

const (
	// the type order TinkerPop's CountMatchAlgorithm sorts patterns by
	wherePredicatePattern patternKind = iota
	whereTraversalPattern
	matchTraversalPattern
)

type matchPattern struct {
	kind  patternKind
	start string     // the start label ("" for a where()/not() pattern)
	body  *Traversal // the pattern without its start and end labels
	end   string     // the end label, "" for none
	// nested is an and()/or() pattern (body is nil then).
	nested *matchSpec
	// whereKey: the start label is where(label, P)'s start key (no start
	// label of the match then, as in TinkerPop).
	whereKey bool
	// local: the body has a barrier and runs as a flatMap.
	local bool
	// needs are the labels that must be bound before the pattern runs
	// (TinkerPop's Helper.getStartLabels: the start label and the labels
	// where() steps inside it read that some pattern binds).
	needs []string
}

type matchSpec struct {
	or       bool
	patterns []*matchPattern // in the order they are tried
	// labels: the match's start and end labels (what the bindings hold).
	starts, ends  []string
	computedStart string
}

func compileMatch(s *step) error {
	ts := make([]*Traversal, 0, len(s.args))
	for _, a := range s.args {
		c, ok := a.(*Traversal)
		if !ok {
			return evalErr("match() takes traversals, got %s", describe(a))
		}
		ts = append(ts, c)
	}
	if len(ts) == 0 {
		return evalErr("match() takes at least one traversal")
	}
	m, err := newMatchSpec(ts, false)
	if err != nil {
		return err
	}
	s.setMods().match = m
	return nil
}

func newMatchSpec(ts []*Traversal, or bool) (*matchSpec, error) {
	m := &matchSpec{or: or}
	for _, c := range ts {
		p, err := newMatchPattern(c)
		if err != nil {
			return nil, err
		}
		if p.nested != nil {
			m.starts = addLabel(m.starts, p.nested.starts...)
			m.ends = addLabel(m.ends, p.nested.ends...)
		} else {
			if p.start != "" && !p.whereKey {
				m.starts = addLabel(m.starts, p.start)
			}
			if p.end != "" {
				m.ends = addLabel(m.ends, p.end)
			}
		}
		m.patterns = append(m.patterns, p)
	}
	// needs: the start label and the labels where() steps read that are end
	// labels of this match.
	for _, p := range m.patterns {
		if p.nested != nil {
			p.needs = p.nested.scopeKeys()
			continue
		}
		if p.start != "" {
			p.needs = addLabel(p.needs, p.start)
		}
		for _, l := range whereKeys(p.body, nil, 0) {
			if contains(m.ends, l) {
				p.needs = addLabel(p.needs, l)
			}
		}
	}
	m.computedStart = m.computeStart()
	sort.SliceStable(m.patterns, func(i, j int) bool { return m.patterns[i].kind < m.patterns[j].kind })
	return m, nil
}

func newMatchPattern(c *Traversal) (*matchPattern, error) {
	if len(c.steps) == 0 {
		return nil, evalErr("All match()-traversals must have a single start label (i.e. variable): an empty traversal")
	}
	first := c.steps[0]
	p := &matchPattern{kind: matchTraversalPattern}
	var body []*step
	switch {
	case (first.op == "and" || first.op == "or") && len(first.labels) == 0 && len(c.steps) == 1:
		var ts []*Traversal
		for _, a := range first.args {
			k, ok := a.(*Traversal)
			if !ok {
				return nil, evalErr("%s() takes traversals", first.op)
			}
			ts = append(ts, k)
		}
		n, err := newMatchSpec(ts, first.op == "or")
		if err != nil {
			return nil, err
		}
		p.nested = n
		return p, nil
	case first.op == "not" && len(first.labels) == 0:
		w := &step{op: "where", args: []any{&Traversal{steps: []*step{first}}}, run: runWhere}
		if !whereLabelsOK(w.args[0].(*Traversal)) {
			return nil, evalErr("not() inside match() with as() step labels in the middle of its traversal is not supported by graphd")
		}
		body = append([]*step{w}, c.steps[1:]...)
		p.kind = whereTraversalPattern
	case first.op == "where":
		body = c.steps
		p.kind = whereTraversalPattern
		if len(first.args) == 2 {
			// where('a', P): starts at a (its start key), as as('a').where(P)
			k, _ := first.args[0].(string)
			p.start, p.kind, p.whereKey = k, wherePredicatePattern, true
			w := *first
			w.args = first.args[1:]
			body = append([]*step{&w}, c.steps[1:]...)
		} else if _, ok := first.args[0].(*gb.P); ok {
			p.kind = wherePredicatePattern
		}
	case first.op == "identity" && len(first.labels) > 0:
		if len(first.labels) > 1 {
			return nil, evalErr("All match()-traversals must have a single start label (i.e. variable): as(%s)", strings.Join(first.labels, ", "))
		}
		p.start = first.labels[0]
		body = c.steps[1:]
		if len(body) > 0 && body[0].op == "where" {
			p.kind = whereTraversalPattern
			if _, ok := body[0].args[0].(*gb.P); ok && len(body[0].args) == 1 {
				p.kind = wherePredicatePattern
			}
		}
	default:
		return nil, evalErr("All match()-traversals must have a single start label (i.e. variable): a traversal starting with %s()", first.op)
	}
	if n := len(body); n > 0 {
		last := body[n-1]
		if len(last.labels) > 1 {
			return nil, evalErr("The end step of a match()-traversal can have at most one label: as(%s)", strings.Join(last.labels, ", "))
		}
		if len(last.labels) == 1 {
			p.end = last.labels[0]
			l := *last
			l.labels = nil
			body = append(append([]*step(nil), body[:n-1]...), &l)
		}
	}
	p.body = &Traversal{steps: body}
	for _, st := range body {
		// TinkerPop computes a pattern with a barrier locally (a flatMap):
		// its results continue the path of the traverser it started from.
		if matchBarriers[st.op] {
			p.local = true
		}
	}
	return p, nil
}

// matchBarriers are the steps TinkerPop counts as barriers.
var matchBarriers = map[string]bool{"count": true, "sum": true, "min": true, "max": true, "mean": true,
	"fold": true, "group": true, "groupCount": true, "tree": true, "order": true, "sample": true,
	"barrier": true, "cap": true, "dedup": true, "tail": true, "aggregate": true}

// whereKeys collects the labels where() steps in t (and its children) read.
func whereKeys(t *Traversal, into []string, depth int) []string {
	if t == nil || depth > 100 {
		return into
	}
	for _, s := range t.steps {
		if s.op == "where" {
			for _, a := range s.args {
				switch x := a.(type) {
				case string:
					into = addLabel(into, x)
				case *gb.P:
					into = addLabel(into, pLabels(x)...)
				case *Traversal:
					into = addLabel(into, allLabels(x, nil, depth+1)...)
				}
			}
		}
		s.anyChild(func(c *Traversal) bool {
			into = whereKeys(c, into, depth+1)
			return false
		})
	}
	return into
}

func pLabels(p *gb.P) []string {
	var out []string
	for _, v := range p.Values {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case *gb.P:
			out = append(out, pLabels(x)...)
		}
	}
	return out
}

func allLabels(t *Traversal, into []string, depth int) []string {
	if depth > 100 {
		return into
	}
	for _, s := range t.steps {
		into = addLabel(into, s.labels...)
		s.anyChild(func(c *Traversal) bool {
			into = allLabels(c, into, depth+1)
			return false
		})
	}
	return into
}

func addLabel(ls []string, add ...string) []string {
	for _, l := range add {
		if !contains(ls, l) {
			ls = append(ls, l)
		}
	}
	return ls
}

func contains(ls []string, l string) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

// scopeKeys are what a nested match needs bound (MatchStep.getScopeKeys): the
// labels its patterns start from or end on, less its own end labels and its
// computed start label.
func (m *matchSpec) scopeKeys() []string {
	var keys []string
	for _, p := range m.patterns {
		keys = addLabel(keys, p.needs...)
		if p.end != "" {
			keys = addLabel(keys, p.end)
		}
	}
	out := keys[:0:0]
	for _, k := range keys {
		if !contains(m.ends, k) && k != m.computedStart {
			out = append(out, k)
		}
	}
	return out
}

// computeStart is MatchStep.Helper.computeStartLabel: a start label no
// pattern ends on (the first in Java's HashSet order), else the first label
// of the patterns' labels sorted so that a pattern's start comes before its
// end.
func (m *matchSpec) computeStart() string {
	var starts, ends []string
	for _, p := range m.patterns {
		if p.end != "" {
			ends = addLabel(ends, p.end)
		}
		starts = addLabel(starts, p.needs...)
	}
	var free []string
	for _, s := range starts {
		if !contains(ends, s) {
			free = append(free, s)
		}
	}
	if len(free) > 0 {
		return javaHashSetOrder(free)[0]
	}
	var all []string
	for _, p := range m.patterns {
		all = addLabel(all, p.needs...)
		if p.end != "" {
			all = addLabel(all, p.end)
		}
	}
	if len(all) == 0 {
		return ""
	}
	javaSort(all, func(a, b string) int {
		for _, p := range m.patterns {
			if p.end == "" {
				continue
			}
			if a == p.end && contains(p.needs, b) {
				return 1
			} else if b == p.end && contains(p.needs, a) {
				return -1
			}
		}
		return 0
	})
	return all[0]
}

// javaHashSetOrder orders strings as a java.util.HashSet iterates them.
func javaHashSetOrder(ss []string) []string {
	capacity := 16
	for len(ss) > capacity*3/4 {
		capacity *= 2
	}
	type e struct {
		s      string
		bucket int
		i      int
	}
	es := make([]e, len(ss))
	for i, s := range ss {
		var h int32
		for _, c := range s {
			if c > 0xFFFF {
				// a surrogate pair in Java; close enough for ordering
				h = 31*h + int32(c>>10)
				h = 31*h + int32(c&0x3FF)
				continue
			}
			h = 31*h + int32(c)
		}
		u := uint32(h)
		u ^= u >> 16
		es[i] = e{s: s, bucket: int(u & uint32(capacity-1)), i: i}
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].bucket < es[j].bucket })
	out := make([]string, len(es))
	for i, x := range es {
		out[i] = x.s
	}
	return out
}

// javaSort is Collections.sort for short lists (TimSort's run detection and
// binary insertion sort), so that a comparator that is not a total order
// gives Java's answer.
func javaSort(a []string, cmp func(a, b string) int) {
	n := len(a)
	if n < 2 {
		return
	}
	var run int
	if cmp(a[1], a[0]) < 0 {
		run = 2
		for run < n && cmp(a[run], a[run-1]) < 0 {
			run++
		}
		for i, j := 0, run-1; i < j; i, j = i+1, j-1 {
			a[i], a[j] = a[j], a[i]
		}
	} else {
		run = 2
		for run < n && cmp(a[run], a[run-1]) >= 0 {
			run++
		}
	}
	for start := run; start < n; start++ {
		pivot := a[start]
		left, right := 0, start
		for left < right {
			mid := (left + right) / 2
			if cmp(pivot, a[mid]) < 0 {
				right = mid
			} else {
				left = mid + 1
			}
		}
		copy(a[left+1:start+1], a[left:start])
		a[left] = pivot
	}
}

// pathLast is the object last bound to label on t's path.
func pathLast(t *trav, label string) (any, bool) {
	for n := t.path; n != nil; n = n.parent {
		for _, l := range n.labels {
			if l == label {
				return n.obj, true
			}
		}
	}
	return nil, false
}

func pathHas(t *trav, label string) bool {
	_, ok := pathLast(t, label)
	return ok
}

func runMatch(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	m := s.mods().match
	var out []*trav
	for _, t := range in {
		done, err := ec.matchOne(m, t)
		if err != nil {
			return nil, err
		}
		for _, d := range done {
			out = append(out, d.split(m.bindings(d)))
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// matchOne runs t through m's patterns and returns the traversers that
// matched, their paths labelled.
func (ec *execCtx) matchOne(m *matchSpec, t *trav) ([]*trav, error) {
	bound := false
	for _, l := range m.starts {
		if pathHas(t, l) {
			bound = true
			break
		}
	}
	if !bound && m.computedStart != "" {
		t = withLabels(t, []string{m.computedStart})
	}
	if m.or {
		var out []*trav
		for _, p := range m.patterns {
			r, err := ec.runPattern(p, t)
			if err != nil {
				return nil, err
			}
			out = append(out, r...)
		}
		return out, nil
	}
	return ec.matchAnd(m, t, make([]bool, len(m.patterns)))
}

func (ec *execCtx) matchAnd(m *matchSpec, t *trav, done []bool) ([]*trav, error) {
	if err := ec.tick(); err != nil {
		return nil, err
	}
	pick := -1
	for i, p := range m.patterns {
		if done[i] || !p.ready(t) {
			continue
		}
		if p.kind != matchTraversalPattern || (p.end != "" && pathHas(t, p.end)) {
			pick = i
			break
		}
		if pick < 0 {
			pick = i
		}
	}
	if pick < 0 {
		for _, d := range done {
			if !d {
				return nil, evalErr("The provided match pattern is unsolvable: no pattern left whose start labels are bound")
			}
		}
		return []*trav{t}, nil
	}
	r, err := ec.runPattern(m.patterns[pick], t)
	if err != nil {
		return nil, err
	}
	next := append([]bool(nil), done...)
	next[pick] = true
	var out []*trav
	for _, o := range r {
		rr, err := ec.matchAnd(m, o, next)
		if err != nil {
			return nil, err
		}
		out = append(out, rr...)
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (p *matchPattern) ready(t *trav) bool {
	for _, l := range p.needs {
		if !pathHas(t, l) {
			return false
		}
	}
	return true
}

func (ec *execCtx) runPattern(p *matchPattern, t *trav) ([]*trav, error) {
	if p.nested != nil {
		r, err := ec.matchOne(p.nested, t)
		if err != nil {
			return nil, err
		}
		for i, o := range r {
			r[i] = o.split(p.nested.bindings(o))
		}
		return r, nil
	}
	in := t
	if p.start != "" {
		v, ok := pathLast(t, p.start)
		if !ok {
			return nil, evalErr("The step with label %s does not exist", p.start)
		}
		in = t.split(v)
	}
	r, err := ec.runChild(p.body, in)
	if err != nil {
		return nil, err
	}
	if p.local {
		for i, o := range r {
			r[i] = in.split(o.obj)
		}
	}
	if p.end == "" {
		return r, nil
	}
	out := r[:0]
	for _, o := range r {
		if v, ok := pathLast(o, p.end); ok && !equal(o.obj, v) {
			continue
		}
		out = append(out, withLabels(o, []string{p.end}))
	}
	return out, nil
}

// bindings maps m's start and end labels to the objects last bound to them on
// t's path (in label order).
func (m *matchSpec) bindings(t *trav) *gb.Map {
	labels := addLabel(append([]string(nil), m.starts...), m.ends...)
	sort.Strings(labels)
	b := &gb.Map{}
	for _, l := range labels {
		if v, ok := pathLast(t, l); ok {
			b.Entries = append(b.Entries, gb.MapEntry{Key: l, Value: v})
		}
	}
	return b
}
