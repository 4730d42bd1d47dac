package traversal

import (
	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// subgraph is SubgraphStrategy: the traversal sees only the vertices, edges
// and vertex properties its criteria (filter traversals) accept. Vertices
// are filtered where V(), out()/in()/both() and outV()/inV()/bothV()/otherV()
// produce them; edges where E()
// and the adjacency steps produce or cross them (with checkAdjacentVertices
// an edge also needs both its vertices accepted); vertex properties where
// properties(), values(), valueMap() and elementMap() read them. The
// criteria themselves run on the whole graph.
type subgraph struct {
	vertices, edges, vertexProps *Traversal
	checkAdjacent                bool
}

func newSubgraph(cfg *gb.Map) (*subgraph, error) {
	sg := &subgraph{checkAdjacent: true}
	if cfg == nil {
		return sg, nil
	}
	for _, e := range cfg.Entries {
		k, _ := e.Key.(string)
		switch k {
		case "checkAdjacentVertices":
			b, ok := e.Value.(bool)
			if !ok {
				return nil, evalErr("SubgraphStrategy: checkAdjacentVertices must be a boolean")
			}
			sg.checkAdjacent = b
		case "vertices", "edges", "vertexProperties":
			bc, ok := e.Value.(*gb.Bytecode)
			if !ok {
				return nil, evalErr("SubgraphStrategy: %s must be a traversal", k)
			}
			c, err := compile(bc, 1)
			if err != nil {
				return nil, err
			}
			switch k {
			case "vertices":
				sg.vertices = c
			case "edges":
				sg.edges = c
			default:
				sg.vertexProps = c
			}
		default:
			return nil, evalErr("SubgraphStrategy: unknown option %q", k)
		}
	}
	return sg, nil
}

// accepts runs a criterion on obj with the strategy switched off.
func (ec *execCtx) accepts(c *Traversal, obj any) (bool, error) {
	if c == nil {
		return true, nil
	}
	sg := ec.sub
	ec.sub = nil
	defer func() { ec.sub = sg }()
	out, err := ec.run(c, []*trav{fresh(obj)})
	return len(out) > 0, err
}

func (ec *execCtx) vertexOK(v *graph.Vertex) (bool, error) {
	if ec.part != nil && !ec.part.readable(v) {
		return false, nil
	}
	if ec.sub == nil {
		return true, nil
	}
	return ec.accepts(ec.sub.vertices, v)
}

func (ec *execCtx) edgeOK(e *graph.Edge) (bool, error) {
	if ec.part != nil && !ec.part.readable(e) {
		return false, nil
	}
	if ec.sub == nil {
		return true, nil
	}
	if ec.sub.checkAdjacent && ec.sub.vertices != nil {
		for _, v := range []*graph.Vertex{e.Out, e.In} {
			if ok, err := ec.vertexOK(v); err != nil || !ok {
				return false, err
			}
		}
	}
	return ec.accepts(ec.sub.edges, e)
}

// edgeVertexOK filters what outV()/inV()/bothV()/otherV() produce.
func (ec *execCtx) edgeVertexOK(v *graph.Vertex) (bool, error) {
	return ec.vertexOK(v)
}

// vertexProps returns the values of key on v that the strategy lets through.
func (ec *execCtx) vertexProps(v *graph.Vertex, key string) ([]*graph.VertexProperty, error) {
	vps := v.Properties(key)
	metas := ec.part != nil && ec.part.includeMetas
	if !metas && (ec.sub == nil || ec.sub.vertexProps == nil) {
		return vps, nil
	}
	out := make([]*graph.VertexProperty, 0, len(vps))
	for _, vp := range vps {
		if metas && !ec.part.readable(vp) {
			continue
		}
		ok := true
		if ec.sub != nil {
			var err error
			if ok, err = ec.accepts(ec.sub.vertexProps, vp); err != nil {
				return nil, err
			}
		}
		if ok {
			out = append(out, vp)
		}
	}
	return out, nil
}

// filterObjs keeps the traversers whose object ok accepts.
func filterTravs(in []*trav, ok func(t *trav) (bool, error)) ([]*trav, error) {
	out := in[:0]
	for _, t := range in {
		keep, err := ok(t)
		if err != nil {
			return nil, err
		}
		if keep {
			out = append(out, t)
		}
	}
	return out, nil
}

// propValues is propValues under SubgraphStrategy's vertex-property filter.
func (ec *execCtx) propValues(o any, key string) ([]any, error) {
	v, ok := o.(*graph.Vertex)
	metas := ec.part != nil && ec.part.includeMetas
	if !ok || (!metas && (ec.sub == nil || ec.sub.vertexProps == nil)) {
		return propValues(o, key), nil
	}
	vps, err := ec.vertexProps(v, key)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(vps))
	for i, vp := range vps {
		out[i] = vp.Value
	}
	return out, nil
}
