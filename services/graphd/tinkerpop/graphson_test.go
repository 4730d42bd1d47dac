package tinkerpop_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"

	"github.com/worldgate/worldgate/services/graphd/graphio"
)

// The test graphs are GraphSON 3 adjacency lists: one vertex per line with its
// properties (each a list of {id, value, properties}) and its out/in edges.

type gsProp struct {
	id    any // the vertex property's id (nil when the file has none)
	value any
	meta  [][2]any // meta-properties, in file order
}

type gsVertex struct {
	id    any
	label string
	keys  []string
	props map[string][]gsProp
}

type gsEdge struct {
	id       any
	label    string
	out, in  any
	keys     []string
	props    map[string]any
	fileLine int
}

type gsGraph struct {
	vertices []gsVertex
	edges    []gsEdge
}

// The suite's loader reads values and key order as graphd's io() does (graphio), and keeps
// its own edge order: every edge from its out vertex's outE list, in file order, which the
// ordering scenarios depend on.
var (
	gsValue     = graphio.Value
	orderedKeys = graphio.Keys
)

// readGraphSON reads a GraphSON 3 adjacency-list file for the suite.
func readGraphSON(path string) (*gsGraph, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	g := &gsGraph{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v struct {
			ID         json.RawMessage              `json:"id"`
			Label      string                       `json:"label"`
			OutE       map[string][]json.RawMessage `json:"outE"`
			Properties json.RawMessage              `json:"properties"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		id, err := gsValue(v.ID)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		gv := gsVertex{id: id, label: v.Label, props: map[string][]gsProp{}}
		if len(v.Properties) > 0 {
			if gv.keys, err = orderedKeys(v.Properties); err != nil {
				return nil, err
			}
			var props map[string][]struct {
				ID         json.RawMessage `json:"id"`
				Value      json.RawMessage `json:"value"`
				Properties json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(v.Properties, &props); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
			for _, k := range gv.keys {
				for _, p := range props[k] {
					val, err := gsValue(p.Value)
					if err != nil {
						return nil, fmt.Errorf("%s:%d: %w", path, line, err)
					}
					gp := gsProp{value: val}
					if len(p.ID) > 0 {
						if gp.id, err = gsValue(p.ID); err != nil {
							return nil, fmt.Errorf("%s:%d: %w", path, line, err)
						}
					}
					if len(p.Properties) > 0 {
						mkeys, err := orderedKeys(p.Properties)
						if err != nil {
							return nil, err
						}
						var meta map[string]json.RawMessage
						if err := json.Unmarshal(p.Properties, &meta); err != nil {
							return nil, err
						}
						for _, mk := range mkeys {
							mv, err := gsValue(meta[mk])
							if err != nil {
								return nil, err
							}
							gp.meta = append(gp.meta, [2]any{mk, mv})
						}
					}
					gv.props[k] = append(gv.props[k], gp)
				}
			}
		}
		g.vertices = append(g.vertices, gv)
		// Edges are written from their out vertex (each edge appears once in an outE list).
		outKeys := make([]string, 0, len(v.OutE))
		if raw := extractField(sc.Bytes(), "outE"); raw != nil {
			if outKeys, err = orderedKeys(raw); err != nil {
				return nil, err
			}
		}
		for _, label := range outKeys {
			for _, er := range v.OutE[label] {
				var e struct {
					ID         json.RawMessage            `json:"id"`
					InV        json.RawMessage            `json:"inV"`
					Properties map[string]json.RawMessage `json:"properties"`
				}
				if err := json.Unmarshal(er, &e); err != nil {
					return nil, err
				}
				eid, err := gsValue(e.ID)
				if err != nil {
					return nil, err
				}
				in, err := gsValue(e.InV)
				if err != nil {
					return nil, err
				}
				ge := gsEdge{id: eid, label: label, out: id, in: in, props: map[string]any{}, fileLine: line}
				if pr := extractField(er, "properties"); pr != nil {
					if ge.keys, err = orderedKeys(pr); err != nil {
						return nil, err
					}
				}
				for _, k := range ge.keys {
					if ge.props[k], err = gsValue(e.Properties[k]); err != nil {
						return nil, err
					}
				}
				g.edges = append(g.edges, ge)
			}
		}
	}
	return g, sc.Err()
}

func extractField(obj []byte, name string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return nil
	}
	return m[name]
}

// load writes the graph into graphd through gremlin-go, batch vertices and
// edges per request.
func (gg *gsGraph) load(g *gremlingo.GraphTraversalSource) error {
	const batch = 100
	for i := 0; i < len(gg.vertices); i += batch {
		var t *gremlingo.GraphTraversal
		for _, v := range gg.vertices[i:min(i+batch, len(gg.vertices))] {
			if t == nil {
				t = g.AddV(v.label)
			} else {
				t = t.AddV(v.label)
			}
			t = t.Property(gremlingo.T.Id, v.id)
			for _, k := range v.keys {
				ps := v.props[k]
				for _, p := range ps {
					if len(ps) == 1 && len(p.meta) == 0 && p.id == nil {
						t = t.Property(k, p.value)
						continue
					}
					args := []any{gremlingo.Cardinality.List, k, p.value}
					if p.id != nil {
						args = append(args, gremlingo.T.Id, p.id)
					}
					for _, m := range p.meta {
						args = append(args, m[0], m[1])
					}
					t = t.Property(args...)
				}
			}
		}
		if err := <-t.Iterate(); err != nil {
			return fmt.Errorf("loading vertices: %w", err)
		}
	}
	for i := 0; i < len(gg.edges); i += batch {
		var t *gremlingo.GraphTraversal
		for _, e := range gg.edges[i:min(i+batch, len(gg.edges))] {
			if t == nil {
				t = g.AddE(e.label)
			} else {
				t = t.AddE(e.label)
			}
			t = t.From(gremlingo.T__.V(e.out)).To(gremlingo.T__.V(e.in)).Property(gremlingo.T.Id, e.id)
			for _, k := range e.keys {
				t = t.Property(k, e.props[k])
			}
		}
		if err := <-t.Iterate(); err != nil {
			return fmt.Errorf("loading edges: %w", err)
		}
	}
	return nil
}
