// Package graph is graphd's in-memory property graph: vertices, edges,
// multi-valued vertex properties, and indexes by id, by vertex label and by
// (property key, value). Mutations go through a Tx that records an undo log
// (for atomic rollback of a failing traversal) and a redo log (the operations
// appended to the write-ahead log by package store).
//
// The graph itself is not synchronised; package store serialises writers and
// lets readers run in parallel.
package graph

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// Vertex is a graph vertex.
type Vertex struct {
	ID      any
	Label   string
	props   map[string][]*VertexProperty
	keys    []string
	out, in []*Edge
	removed bool
}

// VertexProperty is one value of a vertex property, with its own
// properties (meta-properties).
type VertexProperty struct {
	ID     int64
	Key    string
	Value  any
	Vertex *Vertex
	meta   map[string]any
	mkeys  []string
}

// MetaKeys returns the keys of the vertex property's own properties in
// insertion order.
func (vp *VertexProperty) MetaKeys() []string { return vp.mkeys }

// Meta returns the value of a meta-property.
func (vp *VertexProperty) Meta(key string) (any, bool) {
	v, ok := vp.meta[key]
	return v, ok
}

func (vp *VertexProperty) setMeta(key string, value any) {
	if value == nil {
		if _, ok := vp.meta[key]; !ok {
			return
		}
		delete(vp.meta, key)
		for i, k := range vp.mkeys {
			if k == key {
				vp.mkeys = append(vp.mkeys[:i:i], vp.mkeys[i+1:]...)
				break
			}
		}
		return
	}
	if vp.meta == nil {
		vp.meta = map[string]any{}
	}
	if _, ok := vp.meta[key]; !ok {
		vp.mkeys = append(vp.mkeys, key)
	}
	vp.meta[key] = value
}

// Edge is a directed, labelled edge.
type Edge struct {
	ID      any
	Label   string
	Out, In *Vertex
	props   map[string]any
	keys    []string
	removed bool
}

// Property is an edge property or a meta-property (key/value with its
// owner: Edge, or VP for a property of a vertex property).
type Property struct {
	Key   string
	Value any
	Edge  *Edge
	VP    *VertexProperty
}

// Removed reports whether the vertex was dropped.
func (v *Vertex) Removed() bool { return v.removed }

// Removed reports whether the edge was dropped.
func (e *Edge) Removed() bool { return e.removed }

// Keys returns the vertex's property keys in insertion order.
func (v *Vertex) Keys() []string { return v.keys }

// Properties returns the values of key (nil if absent).
func (v *Vertex) Properties(key string) []*VertexProperty { return v.props[key] }

// OutEdges returns outgoing edges (do not modify).
func (v *Vertex) OutEdges() []*Edge { return v.out }

// InEdges returns incoming edges (do not modify).
func (v *Vertex) InEdges() []*Edge { return v.in }

// Keys returns the edge's property keys in insertion order.
func (e *Edge) Keys() []string { return e.keys }

// Property returns the value of key.
func (e *Edge) Property(key string) (any, bool) {
	v, ok := e.props[key]
	return v, ok
}

// Cardinality of a vertex property write.
type Cardinality int

// Cardinalities.
const (
	Single Cardinality = iota
	List
	Set
)

// NormalizeID maps an id to its canonical form: integers become int64;
// strings and UUIDs stay as they are. Anything else is rejected.
func NormalizeID(id any) (any, error) {
	switch x := id.(type) {
	case string, int64, uuid.UUID:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), nil
		}
	case float32:
		if float64(x) == math.Trunc(float64(x)) && math.Abs(float64(x)) < 1<<24 {
			return int64(x), nil
		}
	case nil:
		return nil, errors.New("id must not be null")
	}
	return nil, fmt.Errorf("unsupported id type %T (use a string, long or UUID)", id)
}

// indexKey returns a hashable key for indexable values.
type timeKey struct{ ns int64 }

// IndexKey maps a value to a comparable key such that values Gremlin treats
// as equal (1, 1L, 1.0) share a key. ok is false for unindexable values.
func IndexKey(v any) (any, bool) {
	switch x := v.(type) {
	case string, bool, uuid.UUID:
		return x, true
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint8:
		return int64(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<62 {
			return int64(x), true
		}
		if x != x {
			return nil, false
		}
		return x, true
	case float32:
		return IndexKey(float64(x))
	case time.Time:
		return timeKey{x.UnixNano()}, true
	}
	return nil, false
}

type ordSet[T comparable] struct {
	idx   map[T]int
	items []T
	holes int
}

func newOrdSet[T comparable]() *ordSet[T] { return &ordSet[T]{idx: map[T]int{}} }

func (s *ordSet[T]) add(x T) {
	if _, ok := s.idx[x]; ok {
		return
	}
	s.idx[x] = len(s.items)
	s.items = append(s.items, x)
}

func (s *ordSet[T]) remove(x T) {
	i, ok := s.idx[x]
	if !ok {
		return
	}
	var zero T
	delete(s.idx, x)
	s.items[i] = zero
	s.holes++
	if s.holes > 32 && s.holes > len(s.items)/2 {
		n := s.items[:0]
		for _, it := range s.items {
			if it != zero {
				s.idx[it] = len(n)
				n = append(n, it)
			}
		}
		clear(s.items[len(n):])
		s.items = n
		s.holes = 0
	}
}

func (s *ordSet[T]) len() int { return len(s.idx) }

func (s *ordSet[T]) list() []T {
	var zero T
	out := make([]T, 0, len(s.idx))
	for _, it := range s.items {
		if it != zero {
			out = append(out, it)
		}
	}
	return out
}

// Graph is the in-memory property graph.
type Graph struct {
	vertices map[any]*Vertex
	vorder   *ordSet[*Vertex]
	edges    map[any]*Edge
	eorder   *ordSet[*Edge]
	byLabel  map[string]*ordSet[*Vertex]
	propIdx  map[string]map[any]*ordSet[*Vertex]
	nextID   int64
	nextVPID int64
}

// New returns an empty graph.
func New() *Graph {
	return &Graph{
		vertices: map[any]*Vertex{},
		vorder:   newOrdSet[*Vertex](),
		edges:    map[any]*Edge{},
		eorder:   newOrdSet[*Edge](),
		byLabel:  map[string]*ordSet[*Vertex]{},
		propIdx:  map[string]map[any]*ordSet[*Vertex]{},
		nextID:   1,
		nextVPID: 1,
	}
}

// VertexCount returns the number of vertices.
func (g *Graph) VertexCount() int { return g.vorder.len() }

// EdgeCount returns the number of edges.
func (g *Graph) EdgeCount() int { return g.eorder.len() }

// Vertex looks up a vertex by (normalised) id.
func (g *Graph) Vertex(id any) *Vertex {
	nid, err := NormalizeID(id)
	if err != nil {
		return nil
	}
	return g.vertices[nid]
}

// Edge looks up an edge by id.
func (g *Graph) Edge(id any) *Edge {
	nid, err := NormalizeID(id)
	if err != nil {
		return nil
	}
	return g.edges[nid]
}

// Vertices returns all vertices in insertion order.
func (g *Graph) Vertices() []*Vertex { return g.vorder.list() }

// Edges returns all edges in insertion order.
func (g *Graph) Edges() []*Edge { return g.eorder.list() }

// VerticesByLabel returns vertices with the label.
func (g *Graph) VerticesByLabel(label string) []*Vertex {
	s := g.byLabel[label]
	if s == nil {
		return nil
	}
	return s.list()
}

// CountByLabel returns the number of vertices with a label.
func (g *Graph) CountByLabel(label string) int {
	if s := g.byLabel[label]; s != nil {
		return s.len()
	}
	return 0
}

// VerticesByProperty returns vertices having key=value. ok is false when the
// value cannot be looked up in the index (the caller must scan).
func (g *Graph) VerticesByProperty(key string, value any) ([]*Vertex, bool) {
	k, ok := IndexKey(value)
	if !ok {
		return nil, false
	}
	m := g.propIdx[key]
	if m == nil || m[k] == nil {
		return nil, true
	}
	return m[k].list(), true
}

// CountByProperty estimates selectivity of key=value.
func (g *Graph) CountByProperty(key string, value any) (int, bool) {
	k, ok := IndexKey(value)
	if !ok {
		return 0, false
	}
	if m := g.propIdx[key]; m != nil && m[k] != nil {
		return m[k].len(), true
	}
	return 0, true
}

func (g *Graph) indexAdd(v *Vertex, key string, value any) {
	k, ok := IndexKey(value)
	if !ok {
		return
	}
	m := g.propIdx[key]
	if m == nil {
		m = map[any]*ordSet[*Vertex]{}
		g.propIdx[key] = m
	}
	s := m[k]
	if s == nil {
		s = newOrdSet[*Vertex]()
		m[k] = s
	}
	s.add(v)
}

func (g *Graph) indexRemove(v *Vertex, key string, value any) {
	k, ok := IndexKey(value)
	if !ok {
		return
	}
	if m := g.propIdx[key]; m != nil {
		if s := m[k]; s != nil {
			// another value of the same key may still map to k (list cardinality)
			for _, vp := range v.props[key] {
				if k2, ok := IndexKey(vp.Value); ok && k2 == k {
					return
				}
			}
			s.remove(v)
			if s.len() == 0 {
				delete(m, k)
			}
		}
	}
}

// Tx records undo and redo for one traversal's mutations. A nil *Tx records
// nothing (used while replaying the log).
type Tx struct {
	g    *Graph
	undo []func()
	ops  []any
}

// Begin starts recording.
func (g *Graph) Begin() *Tx { return &Tx{g: g} }

// Ops returns the redo operations (GraphBinary-encodable lists).
func (tx *Tx) Ops() []any { return tx.ops }

// Mutated reports whether anything changed.
func (tx *Tx) Mutated() bool { return len(tx.undo) > 0 }

// Rollback undoes every mutation in reverse order.
func (tx *Tx) Rollback() {
	for i := len(tx.undo) - 1; i >= 0; i-- {
		tx.undo[i]()
	}
	tx.undo = nil
	tx.ops = nil
}

func (tx *Tx) record(undo func(), op ...any) {
	if tx == nil {
		return
	}
	tx.undo = append(tx.undo, undo)
	tx.ops = append(tx.ops, op)
}

// ErrExists is returned when an element id is already taken.
var ErrExists = errors.New("element already exists")

func (g *Graph) genID(taken func(any) bool) int64 {
	for {
		id := g.nextID
		g.nextID++
		if !taken(id) {
			return id
		}
	}
}

func (g *Graph) bumpID(id any) {
	if n, ok := id.(int64); ok && n >= g.nextID {
		g.nextID = n + 1
	}
}

// AddVertex creates a vertex. id nil generates a long id.
func (g *Graph) AddVertex(tx *Tx, id any, label string) (*Vertex, error) {
	if id == nil {
		id = g.genID(func(x any) bool { _, ok := g.vertices[x]; return ok })
	} else {
		nid, err := NormalizeID(id)
		if err != nil {
			return nil, err
		}
		id = nid
		if _, ok := g.vertices[id]; ok {
			return nil, fmt.Errorf("vertex with id %v already exists", id)
		}
	}
	if label == "" {
		label = "vertex"
	}
	v := &Vertex{ID: id, Label: label, props: map[string][]*VertexProperty{}}
	g.insertVertex(v)
	prevNext := g.nextID
	g.bumpID(id)
	tx.record(func() { g.deleteVertex(v); g.nextID = prevNext }, "addV", id, label)
	return v, nil
}

func (g *Graph) insertVertex(v *Vertex) {
	v.removed = false
	g.vertices[v.ID] = v
	g.vorder.add(v)
	ls := g.byLabel[v.Label]
	if ls == nil {
		ls = newOrdSet[*Vertex]()
		g.byLabel[v.Label] = ls
	}
	ls.add(v)
	for _, k := range v.keys {
		for _, vp := range v.props[k] {
			g.indexAdd(v, k, vp.Value)
		}
	}
}

func (g *Graph) deleteVertex(v *Vertex) {
	v.removed = true
	delete(g.vertices, v.ID)
	g.vorder.remove(v)
	if ls := g.byLabel[v.Label]; ls != nil {
		ls.remove(v)
		if ls.len() == 0 {
			delete(g.byLabel, v.Label)
		}
	}
	for _, k := range v.keys {
		vps := v.props[k]
		for i := len(vps) - 1; i >= 0; i-- {
			// remove index entries ignoring siblings
			if key, ok := IndexKey(vps[i].Value); ok {
				if m := g.propIdx[k]; m != nil && m[key] != nil {
					m[key].remove(v)
					if m[key].len() == 0 {
						delete(m, key)
					}
				}
			}
		}
	}
}

// AddEdge creates an edge out -label-> in.
func (g *Graph) AddEdge(tx *Tx, id any, label string, out, in *Vertex) (*Edge, error) {
	if out == nil || in == nil || out.removed || in.removed {
		return nil, errors.New("addE: both endpoints must be existing vertices")
	}
	if id == nil {
		id = g.genID(func(x any) bool { _, ok := g.edges[x]; return ok })
	} else {
		nid, err := NormalizeID(id)
		if err != nil {
			return nil, err
		}
		id = nid
		if _, ok := g.edges[id]; ok {
			return nil, fmt.Errorf("edge with id %v already exists", id)
		}
	}
	if label == "" {
		label = "edge"
	}
	e := &Edge{ID: id, Label: label, Out: out, In: in, props: map[string]any{}}
	g.insertEdge(e)
	prevNext := g.nextID
	g.bumpID(id)
	tx.record(func() { g.deleteEdge(e); g.nextID = prevNext }, "addE", id, label, out.ID, in.ID)
	return e, nil
}

func (g *Graph) insertEdge(e *Edge) {
	e.removed = false
	g.edges[e.ID] = e
	g.eorder.add(e)
	e.Out.out = append(e.Out.out, e)
	e.In.in = append(e.In.in, e)
}

func removeEdgeFrom(list []*Edge, e *Edge) []*Edge {
	for i, x := range list {
		if x == e {
			copy(list[i:], list[i+1:])
			list[len(list)-1] = nil
			return list[:len(list)-1]
		}
	}
	return list
}

func (g *Graph) deleteEdge(e *Edge) {
	e.removed = true
	delete(g.edges, e.ID)
	g.eorder.remove(e)
	e.Out.out = removeEdgeFrom(e.Out.out, e)
	e.In.in = removeEdgeFrom(e.In.in, e)
}

// RemoveEdge drops an edge.
func (g *Graph) RemoveEdge(tx *Tx, e *Edge) {
	if e.removed {
		return
	}
	g.deleteEdge(e)
	tx.record(func() { g.insertEdge(e) }, "dropE", e.ID)
}

// RemoveVertex drops a vertex and its incident edges.
func (g *Graph) RemoveVertex(tx *Tx, v *Vertex) {
	if v.removed {
		return
	}
	for len(v.out) > 0 {
		g.RemoveEdge(tx, v.out[len(v.out)-1])
	}
	for len(v.in) > 0 {
		g.RemoveEdge(tx, v.in[len(v.in)-1])
	}
	g.deleteVertex(v)
	tx.record(func() { g.insertVertex(v) }, "dropV", v.ID)
}

func (v *Vertex) snapshotKey(key string) ([]*VertexProperty, bool) {
	old, had := v.props[key]
	return append([]*VertexProperty(nil), old...), had
}

// setKey replaces all values of key on v (nil/empty removes the key).
func (g *Graph) setKey(v *Vertex, key string, vals []*VertexProperty) {
	old := v.props[key]
	for i := len(old) - 1; i >= 0; i-- {
		vp := old[i]
		v.props[key] = old[:i]
		g.indexRemove(v, key, vp.Value)
	}
	if len(vals) == 0 {
		delete(v.props, key)
		for i, k := range v.keys {
			if k == key {
				v.keys = append(v.keys[:i:i], v.keys[i+1:]...)
				break
			}
		}
		return
	}
	if _, had := v.props[key]; !had || len(old) == 0 {
		found := false
		for _, k := range v.keys {
			if k == key {
				found = true
				break
			}
		}
		if !found {
			v.keys = append(v.keys, key)
		}
	}
	v.props[key] = vals
	for _, vp := range vals {
		g.indexAdd(v, key, vp.Value)
	}
}

func (g *Graph) logKey(tx *Tx, v *Vertex, key string, prev []*VertexProperty) {
	if tx == nil {
		return
	}
	tx.record(func() { g.setKey(v, key, prev) }, vprop2Op(v, key)...)
}

// vprop2Op is the redo record of all values of one key: "vprop2", vertex id,
// key, then per value [id, value, [metaKey, metaValue, ...]] (storage format
// 2; format 1's "vprop" carried the values only).
func vprop2Op(v *Vertex, key string) []any {
	vals := make([]any, 0, len(v.props[key]))
	for _, vp := range v.props[key] {
		meta := make([]any, 0, 2*len(vp.mkeys))
		for _, mk := range vp.mkeys {
			meta = append(meta, mk, vp.meta[mk])
		}
		vals = append(vals, []any{vp.ID, vp.Value, meta})
	}
	return []any{"vprop2", v.ID, key, vals}
}

func (g *Graph) newVP(v *Vertex, key string, value any) *VertexProperty {
	vp := &VertexProperty{ID: g.nextVPID, Key: key, Value: value, Vertex: v}
	g.nextVPID++
	return vp
}

// useVPID gives vp a caller-supplied id (T.id of property()).
func (g *Graph) useVPID(vp *VertexProperty, id any) error {
	n, ok := id.(int64)
	if !ok {
		nid, err := NormalizeID(id)
		if err != nil {
			return fmt.Errorf("vertex property id: %w", err)
		}
		if n, ok = nid.(int64); !ok {
			return fmt.Errorf("vertex property ids are numbers, got %T", id)
		}
	}
	vp.ID = n
	if n >= g.nextVPID {
		g.nextVPID = n + 1
	}
	return nil
}

// SetVertexPropertyMeta is SetVertexProperty with the new value's own
// properties (meta-properties, key/value pairs) and optionally its id (nil
// generates one). With set cardinality and an equal value already present,
// the meta-properties go onto that value (as TinkerGraph does).
func (g *Graph) SetVertexPropertyMeta(tx *Tx, v *Vertex, card Cardinality, key string, value any, id any, meta [][2]any) (*VertexProperty, error) {
	if key == "" {
		return nil, errors.New("property key must not be empty")
	}
	if v.removed {
		return nil, errors.New("vertex was removed")
	}
	if value == nil {
		return g.SetVertexProperty(tx, v, card, key, nil)
	}
	prev, _ := v.snapshotKey(key)
	var target *VertexProperty
	var next []*VertexProperty
	if card == Set {
		for _, p := range prev {
			if graphbinary.Equal(p.Value, value) {
				target = p
			}
		}
	}
	var oldMeta map[string]any
	var oldKeys []string
	if target != nil {
		oldMeta, oldKeys = maps.Clone(target.meta), append([]string(nil), target.mkeys...)
		next = prev
	} else {
		target = g.newVP(v, key, value)
		if id != nil {
			if err := g.useVPID(target, id); err != nil {
				return nil, err
			}
		}
		if card == Single {
			next = []*VertexProperty{target}
		} else {
			next = append(append(next, prev...), target)
		}
	}
	for _, m := range meta {
		k, ok := m[0].(string)
		if !ok || k == "" {
			return nil, fmt.Errorf("meta-property keys are strings, got %T", m[0])
		}
		target.setMeta(k, m[1])
	}
	g.setKey(v, key, next)
	if tx != nil {
		t := target
		tx.record(func() { g.setKey(v, key, prev); t.meta, t.mkeys = oldMeta, oldKeys }, vprop2Op(v, key)...)
	}
	return target, nil
}

// SetMetaProperty sets (nil value: removes) a meta-property of vp.
func (g *Graph) SetMetaProperty(tx *Tx, vp *VertexProperty, key string, value any) error {
	if key == "" {
		return errors.New("property key must not be empty")
	}
	v := vp.Vertex
	if v.removed {
		return errors.New("vertex was removed")
	}
	found := false
	for _, p := range v.props[vp.Key] {
		found = found || p == vp
	}
	if !found {
		return errors.New("vertex property was removed")
	}
	oldMeta, oldKeys := maps.Clone(vp.meta), append([]string(nil), vp.mkeys...)
	vp.setMeta(key, value)
	if tx != nil {
		tx.record(func() { vp.meta, vp.mkeys = oldMeta, oldKeys }, vprop2Op(v, vp.Key)...)
	}
	return nil
}

// SetVertexProperty writes a vertex property with the given cardinality and
// returns the new VertexProperty (nil if value was nil and the key removed).
func (g *Graph) SetVertexProperty(tx *Tx, v *Vertex, card Cardinality, key string, value any) (*VertexProperty, error) {
	if key == "" {
		return nil, errors.New("property key must not be empty")
	}
	if v.removed {
		return nil, errors.New("vertex was removed")
	}
	prev, _ := v.snapshotKey(key)
	if value == nil {
		if card == Single && len(prev) > 0 {
			g.setKey(v, key, nil)
			g.logKey(tx, v, key, prev)
		}
		return nil, nil
	}
	vp := g.newVP(v, key, value)
	var next []*VertexProperty
	switch card {
	case Single:
		next = []*VertexProperty{vp}
	case List:
		next = append(append(next, prev...), vp)
	case Set:
		for _, p := range prev {
			if graphbinary.Equal(p.Value, value) {
				return p, nil
			}
		}
		next = append(append(next, prev...), vp)
	}
	g.setKey(v, key, next)
	g.logKey(tx, v, key, prev)
	return vp, nil
}

// SetVertexPropertyValues replaces all values of key (used by replay).
func (g *Graph) SetVertexPropertyValues(tx *Tx, v *Vertex, key string, values []any) {
	prev, _ := v.snapshotKey(key)
	next := make([]*VertexProperty, 0, len(values))
	for _, val := range values {
		next = append(next, &VertexProperty{ID: g.nextVPID, Key: key, Value: val, Vertex: v})
		g.nextVPID++
	}
	g.setKey(v, key, next)
	g.logKey(tx, v, key, prev)
}

// RemoveVertexProperty drops one vertex property value.
func (g *Graph) RemoveVertexProperty(tx *Tx, vp *VertexProperty) {
	v := vp.Vertex
	prev, _ := v.snapshotKey(vp.Key)
	var next []*VertexProperty
	found := false
	for _, p := range prev {
		if p == vp {
			found = true
			continue
		}
		next = append(next, p)
	}
	if !found {
		return
	}
	g.setKey(v, vp.Key, next)
	g.logKey(tx, v, vp.Key, prev)
}

// SetEdgeProperty writes (or with nil value removes) an edge property.
func (g *Graph) SetEdgeProperty(tx *Tx, e *Edge, key string, value any) error {
	if key == "" {
		return errors.New("property key must not be empty")
	}
	if e.removed {
		return errors.New("edge was removed")
	}
	old, had := e.props[key]
	oldKeys := append([]string(nil), e.keys...)
	if value == nil {
		if !had {
			return nil
		}
		delete(e.props, key)
		for i, k := range e.keys {
			if k == key {
				e.keys = append(e.keys[:i:i], e.keys[i+1:]...)
				break
			}
		}
	} else {
		if !had {
			e.keys = append(e.keys, key)
		}
		e.props[key] = value
	}
	tx.record(func() {
		if had {
			e.props[key] = old
		} else {
			delete(e.props, key)
		}
		e.keys = oldKeys
	}, "eprop", e.ID, key, value)
	return nil
}

// Apply replays one redo operation (from the log or a snapshot).
func (g *Graph) Apply(op any) error { return g.ApplyTx(nil, op) }

// IDCounters returns the next generated element and vertex-property ids.
func (g *Graph) IDCounters() (next, nextVP int64) { return g.nextID, g.nextVPID }

// KeepIDCounters raises the id counters to at least next and nextVP: ids a
// rolled-back execution handed out are not handed out again.
func (g *Graph) KeepIDCounters(next, nextVP int64) {
	g.nextID = max(g.nextID, next)
	g.nextVPID = max(g.nextVPID, nextVP)
}

// ApplyTx replays one redo operation, recording it in tx (nil records
// nothing). An operation on an element that no longer exists, or that
// creates an id that is taken, is an error.
func (g *Graph) ApplyTx(tx *Tx, op any) error {
	l, ok := op.([]any)
	if !ok || len(l) == 0 {
		return fmt.Errorf("bad log record %T", op)
	}
	name, _ := l[0].(string)
	arg := func(i int) any {
		if i < len(l) {
			return l[i]
		}
		return nil
	}
	str := func(i int) string { s, _ := arg(i).(string); return s }
	switch name {
	case "addV":
		_, err := g.AddVertex(tx, arg(1), str(2))
		return err
	case "addE":
		out, in := g.Vertex(arg(3)), g.Vertex(arg(4))
		if out == nil {
			return fmt.Errorf("addE: no vertex %v", arg(3))
		}
		if in == nil {
			return fmt.Errorf("addE: no vertex %v", arg(4))
		}
		_, err := g.AddEdge(tx, arg(1), str(2), out, in)
		return err
	case "vprop":
		// storage format 1: values only (ids are generated)
		v := g.Vertex(arg(1))
		if v == nil {
			return fmt.Errorf("vprop: no vertex %v", arg(1))
		}
		vals, _ := arg(3).([]any)
		g.SetVertexPropertyValues(tx, v, str(2), vals)
		return nil
	case "vprop2":
		v := g.Vertex(arg(1))
		if v == nil {
			return fmt.Errorf("vprop2: no vertex %v", arg(1))
		}
		vals, _ := arg(3).([]any)
		next := make([]*VertexProperty, 0, len(vals))
		for _, e := range vals {
			rec, ok := e.([]any)
			if !ok || len(rec) != 3 {
				return fmt.Errorf("vprop2: bad value record %T", e)
			}
			vp := &VertexProperty{Key: str(2), Value: rec[1], Vertex: v}
			if err := g.useVPID(vp, rec[0]); err != nil {
				return fmt.Errorf("vprop2: %w", err)
			}
			meta, _ := rec[2].([]any)
			for i := 0; i+1 < len(meta); i += 2 {
				if k, ok := meta[i].(string); ok {
					vp.setMeta(k, meta[i+1])
				}
			}
			next = append(next, vp)
		}
		prev, _ := v.snapshotKey(str(2))
		g.setKey(v, str(2), next)
		g.logKey(tx, v, str(2), prev)
		return nil
	case "eprop":
		e := g.Edge(arg(1))
		if e == nil {
			return fmt.Errorf("eprop: no edge %v", arg(1))
		}
		return g.SetEdgeProperty(tx, e, str(2), arg(3))
	case "dropV":
		v := g.Vertex(arg(1))
		if v == nil {
			return fmt.Errorf("dropV: no vertex %v", arg(1))
		}
		g.RemoveVertex(tx, v)
		return nil
	case "dropE":
		e := g.Edge(arg(1))
		if e == nil {
			return fmt.Errorf("dropE: no edge %v", arg(1))
		}
		g.RemoveEdge(tx, e)
		return nil
	}
	return fmt.Errorf("unknown log operation %q", name)
}

// Dump emits operations that rebuild the graph (for snapshots).
func (g *Graph) Dump(emit func(op []any) error) error {
	for _, v := range g.Vertices() {
		if err := emit([]any{"addV", v.ID, v.Label}); err != nil {
			return err
		}
		for _, k := range v.keys {
			if err := emit(vprop2Op(v, k)); err != nil {
				return err
			}
		}
	}
	for _, e := range g.Edges() {
		if err := emit([]any{"addE", e.ID, e.Label, e.Out.ID, e.In.ID}); err != nil {
			return err
		}
		for _, k := range e.keys {
			if err := emit([]any{"eprop", e.ID, k, e.props[k]}); err != nil {
				return err
			}
		}
	}
	return nil
}
