package traversal

import (
	"strings"

	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// Start and adjacency steps: V, E, inject, out/in/both(E), outV/inV/otherV/bothV.

// ---- start / graph steps ----

func runV(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	var out []*trav
	ids := flattenValues(s.args)
	for _, t := range in {
		var vs []*graph.Vertex
		if len(ids) > 0 {
			for _, id := range ids {
				if v := ec.vertexByID(idArg(id)); v != nil {
					vs = append(vs, v)
				}
			}
		} else {
			vs = ec.candidates(s.mods().hints)
		}
		for _, v := range vs {
			if err := ec.tick(); err != nil {
				return nil, err
			}
			if ok, err := ec.vertexOK(v); err != nil || !ok {
				if err != nil {
					return nil, err
				}
				continue
			}
			out = append(out, t.split(v))
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (ec *execCtx) candidates(hints []hint) []*graph.Vertex {
	best, bestN := -1, ec.g.VertexCount()+1
	for i, h := range hints {
		n := 0
		switch {
		case h.ids != nil:
			n = len(h.ids)
		case h.labels != nil:
			for _, l := range h.labels {
				n += ec.g.CountByLabel(l)
			}
		default:
			for _, v := range h.values {
				c, ok := ec.g.CountByProperty(h.key, v)
				if !ok {
					n = bestN + 1
					break
				}
				n += c
			}
		}
		if n < bestN {
			best, bestN = i, n
		}
	}
	if best < 0 {
		return ec.g.Vertices()
	}
	h := hints[best]
	var out []*graph.Vertex
	seen := map[*graph.Vertex]bool{}
	addAll := func(vs []*graph.Vertex) {
		for _, v := range vs {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	switch {
	case h.ids != nil:
		for _, id := range h.ids {
			if v := ec.vertexByID(idArg(id)); v != nil {
				addAll([]*graph.Vertex{v})
			}
		}
	case h.labels != nil:
		if len(h.labels) == 1 {
			return ec.g.VerticesByLabel(h.labels[0])
		}
		for _, l := range h.labels {
			addAll(ec.g.VerticesByLabel(l))
		}
	default:
		if len(h.values) == 1 {
			vs, _ := ec.g.VerticesByProperty(h.key, h.values[0])
			return vs
		}
		for _, v := range h.values {
			vs, _ := ec.g.VerticesByProperty(h.key, v)
			addAll(vs)
		}
	}
	return out
}

func runE(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	var out []*trav
	ids := flattenValues(s.args)
	for _, t := range in {
		var es []*graph.Edge
		if len(ids) > 0 {
			for _, id := range ids {
				if e := ec.edgeByID(idArg(id)); e != nil {
					es = append(es, e)
				}
			}
		} else {
			es = ec.g.Edges()
		}
		for _, e := range es {
			if err := ec.tick(); err != nil {
				return nil, err
			}
			if ok, err := ec.edgeOK(e); err != nil || !ok {
				if err != nil {
					return nil, err
				}
				continue
			}
			out = append(out, t.split(e))
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func runInject(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	var out []*trav
	for _, a := range s.args {
		// A vertex or edge sent by the client is the graph's element (when
		// it exists), so it can be traversed from.
		switch x := a.(type) {
		case *gb.Vertex:
			if v := ec.g.Vertex(x.ID); v != nil {
				a = v
			}
		case *gb.Edge:
			if e := ec.g.Edge(x.ID); e != nil {
				a = e
			}
		}
		out = append(out, fresh(a))
	}
	// At the start of a traversal the input is the single empty root traverser.
	if len(in) == 1 && in[0].obj == nil && in[0].path == nil {
		return out, nil
	}
	if s.childStart {
		// As the first step of a child traversal (concat(__.inject(x))) the
		// incoming traverser comes first, then the injected values.
		return append(append([]*trav(nil), in...), out...), nil
	}
	// Mid-traversal the injected values come first (g.V(1).values('name').inject('daniel') = daniel, marko).
	return append(out, in...), nil
}

// ---- navigation ----

func runAdj(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	labels, err := strArgs(s)
	if err != nil {
		return nil, err
	}
	labelOK := func(e *graph.Edge) bool {
		if len(labels) == 0 {
			return true
		}
		for _, l := range labels {
			if e.Label == l {
				return true
			}
		}
		return false
	}
	var serr error
	match := func(e *graph.Edge) bool {
		if !labelOK(e) {
			return false
		}
		if !ec.filtering() || serr != nil {
			return serr == nil
		}
		ok, err := ec.edgeOK(e)
		if err != nil {
			serr = err
		}
		return ok
	}
	dir := strings.TrimSuffix(s.op, "E")
	edges := s.op != dir
	var out []*trav
	for _, t := range in {
		v, ok := t.obj.(*graph.Vertex)
		if !ok {
			return nil, evalErr("%s() requires a vertex, got %s", s.op, describe(t.obj))
		}
		if dir == "out" || dir == "both" {
			for _, e := range v.OutEdges() {
				if match(e) {
					if edges {
						out = append(out, t.split(e))
					} else {
						out = append(out, t.split(e.In))
					}
				}
			}
		}
		if dir == "in" || dir == "both" {
			for _, e := range v.InEdges() {
				if match(e) {
					if edges {
						out = append(out, t.split(e))
					} else {
						out = append(out, t.split(e.Out))
					}
				}
			}
		}
		if serr != nil {
			return nil, serr
		}
		if err := ec.tick(); err != nil {
			return nil, err
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	if ec.filtering() && !edges {
		return filterTravs(out, func(t *trav) (bool, error) { return ec.vertexOK(t.obj.(*graph.Vertex)) })
	}
	return out, nil
}

func runEdgeV(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	var out []*trav
	for _, t := range in {
		e, ok := t.obj.(*graph.Edge)
		if !ok {
			return nil, evalErr("%s() requires an edge, got %s", s.op, describe(t.obj))
		}
		switch s.op {
		case "outV":
			out = append(out, t.split(e.Out))
		case "inV":
			out = append(out, t.split(e.In))
		case "bothV":
			out = append(out, t.split(e.Out), t.split(e.In))
		case "otherV":
			var prev any
			if t.path != nil && t.path.parent != nil {
				prev = t.path.parent.obj
			}
			if prev == any(e.Out) {
				out = append(out, t.split(e.In))
			} else if prev == any(e.In) {
				out = append(out, t.split(e.Out))
			} else {
				return nil, evalErr("otherV() needs the vertex the edge was reached from")
			}
		}
	}
	if ec.filtering() {
		return filterTravs(out, func(t *trav) (bool, error) { return ec.edgeVertexOK(t.obj.(*graph.Vertex)) })
	}
	return out, nil
}
