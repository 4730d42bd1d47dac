package traversal

import (
	"strings"

	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// resolve evaluates a traversal argument against t (first result).
func (ec *execCtx) resolve(a any, t *trav, what string) (any, error) {
	if c, ok := a.(*Traversal); ok {
		v, ok, err := ec.first(c, t)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, evalErr("the traversal given to %s produced no value", what)
		}
		return v, nil
	}
	return a, nil
}

// resolveParams replaces the traversals among property() arguments (keys
// and values) by their first result on t.
func (ec *execCtx) resolveParams(p []any, t *trav) ([]any, error) {
	var out []any
	for i, a := range p {
		if _, ok := a.(*Traversal); !ok {
			continue
		}
		if out == nil {
			out = append([]any(nil), p...)
		}
		v, err := ec.resolve(a, t, "property()")
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	if out == nil {
		return p, nil
	}
	return out, nil
}

func (ec *execCtx) labelArg(s *step, t *trav, def string) (string, error) {
	if len(s.args) == 0 {
		return def, nil
	}
	v, err := ec.resolve(s.args[0], t, s.op+"()")
	if err != nil {
		return "", err
	}
	l, ok := v.(string)
	if !ok {
		return "", evalErr("%s() label must be a string, got %T", s.op, v)
	}
	return l, nil
}

// creationProps splits folded property() arguments into the id and the rest.
func (ec *execCtx) creationProps(s *step, t *trav) (id any, label *string, rest [][]any, err error) {
	for _, p := range s.mods().props {
		if len(p) == 2 {
			if e, ok := p[0].(gb.Enum); ok && e.Type == gb.TypeT {
				v, err := ec.resolve(p[1], t, "property()")
				if err != nil {
					return nil, nil, nil, err
				}
				switch e.Name {
				case "id":
					id = v
					continue
				case "label":
					l, ok := v.(string)
					if !ok {
						return nil, nil, nil, evalErr("T.label must be a string")
					}
					label = &l
					continue
				}
			}
		}
		rest = append(rest, p)
	}
	return id, label, rest, nil
}

func runAddV(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	tx, err := ec.mut()
	if err != nil {
		return nil, err
	}
	var out []*trav
	for _, t := range in {
		label, err := ec.labelArg(s, t, "vertex")
		if err != nil {
			return nil, err
		}
		id, l2, rest, err := ec.creationProps(s, t)
		if err != nil {
			return nil, err
		}
		if l2 != nil {
			label = *l2
		}
		v, err := ec.g.AddVertex(tx, id, label)
		if err != nil {
			return nil, evalErr("%v", err)
		}
		if err := ec.stamp(tx, v); err != nil {
			return nil, err
		}
		nt := t.split(v)
		for _, p := range rest {
			// The traversals of the folded property() calls run on the
			// incoming traverser, as TinkerPop's Parameters do.
			p, err := ec.resolveParams(p, t)
			if err != nil {
				return nil, err
			}
			// Properties folded into addV() attach with list cardinality, as
			// TinkerGraph's addVertex(keyValues) does: addV().property(k, a).
			// property(k, b) creates both values. An explicit cardinality
			// stays as given.
			if len(p) > 0 {
				if e, ok := p[0].(gb.Enum); !ok || e.Type != gb.TypeCardinality {
					p = append([]any{gb.Enum{Type: gb.TypeCardinality, Name: "list"}}, p...)
				}
			}
			if err := ec.setProperty(nt, p); err != nil {
				return nil, err
			}
		}
		out = append(out, nt)
	}
	return out, nil
}

func (ec *execCtx) endpoint(a any, t *trav, which string) (*graph.Vertex, error) {
	var v any
	switch x := a.(type) {
	case string:
		sel, ok := ec.selectOne(t, "last", x)
		if !ok {
			return nil, evalErr("addE(): %s('%s') refers to an unknown step label", which, x)
		}
		v = sel
	case *Traversal:
		r, ok, err := ec.first(x, t)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, evalErr("addE(): the %s() traversal produced no vertex", which)
		}
		v = r
	default:
		v = x
	}
	switch x := v.(type) {
	case *graph.Vertex:
		return x, nil
	case *gb.Vertex:
		if gv := ec.g.Vertex(x.ID); gv != nil {
			return gv, nil
		}
		return nil, evalErr("addE(): %s() vertex %v does not exist", which, x.ID)
	}
	if gv := ec.g.Vertex(v); gv != nil {
		return gv, nil
	}
	return nil, evalErr("addE(): %s() must be a vertex, got %s", which, describe(v))
}

func runAddE(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	tx, err := ec.mut()
	if err != nil {
		return nil, err
	}
	m := s.mods()
	var out []*trav
	for _, t := range in {
		label, err := ec.labelArg(s, t, "edge")
		if err != nil {
			return nil, err
		}
		var from, to *graph.Vertex
		if m.hasFrom {
			if from, err = ec.endpoint(m.from, t, "from"); err != nil {
				return nil, err
			}
		} else if v, ok := t.obj.(*graph.Vertex); ok {
			from = v
		}
		if m.hasTo {
			if to, err = ec.endpoint(m.to, t, "to"); err != nil {
				return nil, err
			}
		} else if v, ok := t.obj.(*graph.Vertex); ok {
			to = v
		}
		if from == nil || to == nil {
			return nil, evalErr("addE(%s) needs from() and to() vertices", label)
		}
		id, l2, rest, err := ec.creationProps(s, t)
		if err != nil {
			return nil, err
		}
		if l2 != nil {
			label = *l2
		}
		e, err := ec.g.AddEdge(tx, id, label, from, to)
		if err != nil {
			return nil, evalErr("%v", err)
		}
		if err := ec.stamp(tx, e); err != nil {
			return nil, err
		}
		nt := t.split(e)
		for _, p := range rest {
			p, err := ec.resolveParams(p, t)
			if err != nil {
				return nil, err
			}
			if err := ec.setProperty(nt, p); err != nil {
				return nil, err
			}
		}
		out = append(out, nt)
	}
	return out, nil
}

func runProperty(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if _, err := ec.mut(); err != nil {
		return nil, err
	}
	for _, t := range in {
		if err := ec.setProperty(t, s.args); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// setProperty implements property([cardinality,] key, value) and property(map).
func (ec *execCtx) setProperty(t *trav, args []any) error {
	tx, err := ec.mut()
	if err != nil {
		return err
	}
	card := graph.Single
	explicit := false
	if len(args) > 0 {
		if e, ok := args[0].(gb.Enum); ok && e.Type == gb.TypeCardinality {
			c, err := cardinalityOf(e)
			if err != nil {
				return err
			}
			card, explicit = c, true
			args = args[1:]
		}
	}
	if len(args) == 1 {
		m, ok := args[0].(*gb.Map)
		if !ok {
			return evalErr("property() takes a key and a value, or a map")
		}
		for _, e := range m.Entries {
			a := []any{e.Key, e.Value}
			if explicit {
				a = append([]any{gb.Enum{Type: gb.TypeCardinality, Name: cardName(card)}}, a...)
			}
			if err := ec.setProperty(t, a); err != nil {
				return err
			}
		}
		return nil
	}
	if len(args) < 2 {
		return evalErr("property() takes a key and a value")
	}
	var meta [][2]any
	var vpID any
	if len(args) > 2 {
		rest := args[2:]
		if len(rest)%2 != 0 {
			return evalErr("property(key, value, k, v, ...) takes meta-properties as key/value pairs")
		}
		for i := 0; i < len(rest); i += 2 {
			mv, err := ec.resolve(rest[i+1], t, "property()")
			if err != nil {
				return err
			}
			switch mk := rest[i].(type) {
			case string:
				meta = append(meta, [2]any{mk, mv})
			case gb.Enum:
				if mk.Type == gb.TypeT && mk.Name == "id" {
					vpID = mv
					continue
				}
				return evalErr("meta-property keys are strings or T.id, got T.%s", mk.Name)
			default:
				return evalErr("meta-property keys are strings, got %T", rest[i])
			}
		}
	}
	var key string
	keyArg := args[0]
	if c, ok := keyArg.(*Traversal); ok {
		// property(traversal, value): the key is the traversal's result
		if keyArg, err = ec.resolve(c, t, "property()"); err != nil {
			return err
		}
	}
	switch k := keyArg.(type) {
	case string:
		key = k
	case gb.Enum:
		if k.Type == gb.TypeT {
			return evalErr("T.%s can only be set when the element is created (addV/addE)", k.Name)
		}
		return evalErr("property key must be a string")
	default:
		return evalErr("property key must be a string, got %s", describe(keyArg))
	}
	val, err := ec.resolve(args[1], t, "property()")
	if err != nil {
		return err
	}
	if cv, ok := val.(cardValue); ok {
		card, val = cv.card, cv.value
	}
	switch x := t.obj.(type) {
	case *graph.Vertex:
		if x.Removed() {
			return evalErr("cannot set a property on removed vertex %v", x.ID)
		}
		if meta != nil || vpID != nil {
			if _, err := ec.g.SetVertexPropertyMeta(tx, x, card, key, val, vpID, meta); err != nil {
				return evalErr("%v", err)
			}
			return nil
		}
		if _, err := ec.g.SetVertexProperty(tx, x, card, key, val); err != nil {
			return evalErr("%v", err)
		}
	case *graph.Edge:
		if explicit && card != graph.Single {
			return evalErr("edge properties have single cardinality")
		}
		if meta != nil || vpID != nil {
			return evalErr("edge properties have no properties of their own")
		}
		if err := ec.g.SetEdgeProperty(tx, x, key, val); err != nil {
			return evalErr("%v", err)
		}
	case *graph.VertexProperty:
		if explicit {
			return evalErr("properties of a vertex property have no cardinality")
		}
		if meta != nil || vpID != nil {
			return evalErr("properties of a vertex property have no properties of their own")
		}
		if err := ec.g.SetMetaProperty(tx, x, key, val); err != nil {
			return evalErr("%v", err)
		}
	default:
		return evalErr("property() requires an element, got %s", describe(t.obj))
	}
	return nil
}

func cardName(c graph.Cardinality) string {
	switch c {
	case graph.List:
		return "list"
	case graph.Set:
		return "set"
	}
	return "single"
}

func runDrop(ec *execCtx, _ *step, in []*trav) ([]*trav, error) {
	tx, err := ec.mut()
	if err != nil {
		return nil, err
	}
	for _, t := range in {
		switch x := t.obj.(type) {
		case *graph.Vertex:
			ec.g.RemoveVertex(tx, x)
		case *graph.Edge:
			ec.g.RemoveEdge(tx, x)
		case *graph.VertexProperty:
			ec.g.RemoveVertexProperty(tx, x)
		case *graph.Property:
			if x.VP != nil {
				if err := ec.g.SetMetaProperty(tx, x.VP, x.Key, nil); err != nil {
					return nil, evalErr("%v", err)
				}
				continue
			}
			if err := ec.g.SetEdgeProperty(tx, x.Edge, x.Key, nil); err != nil {
				return nil, evalErr("%v", err)
			}
		default:
			return nil, evalErr("drop() requires an element or property, got %s", describe(t.obj))
		}
	}
	return nil, nil
}

// ---- merge ----

func (ec *execCtx) mergeMap(a any, t *trav, what string) (*gb.Map, error) {
	v := a
	if c, ok := a.(*Traversal); ok {
		r, ok, err := ec.first(c, t)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, nil
		}
		v = r
	}
	switch m := v.(type) {
	case *gb.Map:
		return m, nil
	case nil:
		return nil, nil
	}
	return nil, evalErr("%s expects a map, got %T", what, v)
}

// option returns the value of option(Merge.name, value[, cardinality]). With
// a cardinality (a constant map), every value of the map that has no explicit
// cardinality of its own takes it, as GraphTraversal.option(Merge, Map,
// Cardinality) does.
func (s *step) option(name string) (any, bool) {
	for _, o := range s.mods().options {
		if len(o) != 2 && len(o) != 3 {
			continue
		}
		e, ok := o[0].(gb.Enum)
		if !ok || e.Type != gb.TypeMerge || e.Name != name {
			continue
		}
		if len(o) == 2 {
			return o[1], true
		}
		m, ok := o[1].(*gb.Map)
		if !ok {
			return o[1], true
		}
		c, err := cardinalityOf(o[2])
		if err != nil {
			return o[1], true
		}
		w := &gb.Map{Entries: make([]gb.MapEntry, len(m.Entries))}
		for i, en := range m.Entries {
			if _, ok := en.Value.(cardValue); !ok {
				en.Value = cardValue{card: c, value: en.Value}
			}
			w.Entries[i] = en
		}
		return w, true
	}
	return nil, false
}

// onMatchTraverser is the traverser option(onMatch) runs on: the matched
// element for the start step g.mergeV()/g.mergeE(); mid-traversal the
// incoming traverser, which must not be an element when onMatch is a
// traversal (TinkerPop 3.7's guard rail against mutating the wrong element).
func onMatchTraverser(s *step, o any, t, matched *trav, stepName string) (*trav, error) {
	if s.rootStart {
		return matched, nil
	}
	if _, isTrav := o.(*Traversal); isTrav {
		switch t.obj.(type) {
		case *graph.Vertex, *graph.Edge, *graph.VertexProperty, *graph.Property:
			return nil, evalErr("The incoming traverser for %s cannot be an Element", stepName)
		}
	}
	return t, nil
}

// validateOnMatch checks an option(onMatch) map: string keys, no hidden keys.
func validateOnMatch(m *gb.Map) error {
	if m == nil {
		return nil
	}
	for _, e := range m.Entries {
		k, ok := e.Key.(string)
		if !ok {
			return evalErr("option(onMatch) expects keys in Map to be of String - check: %s", gremlinString(e.Key))
		}
		if strings.HasPrefix(k, "~") {
			return evalErr("Property key can not be a hidden key: %s", k)
		}
	}
	return nil
}

func isT(k any, name string) bool {
	e, ok := k.(gb.Enum)
	return ok && e.Type == gb.TypeT && e.Name == name
}

func isDir(k any, name string) bool {
	e, ok := k.(gb.Enum)
	return ok && e.Type == gb.TypeDirection && e.Name == name
}

func vertexMatches(v *graph.Vertex, m *gb.Map) bool {
	for _, e := range m.Entries {
		switch {
		case isT(e.Key, "id"):
			if !equal(v.ID, normID(e.Value)) {
				return false
			}
		case isT(e.Key, "label"):
			if v.Label != e.Value {
				return false
			}
		default:
			k, _ := e.Key.(string)
			found := false
			for _, pv := range propValues(v, k) {
				if equal(pv, e.Value) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}

func normID(v any) any {
	if n, err := graph.NormalizeID(idArg(v)); err == nil {
		return n
	}
	return v
}

func validateMergeKeys(m *gb.Map, edge bool, what string) error {
	if m == nil {
		return nil
	}
	for _, e := range m.Entries {
		switch k := e.Key.(type) {
		case string:
			if strings.HasPrefix(k, "~") {
				return evalErr("%s: Property key can not be a hidden key: %s", what, k)
			}
		case gb.Enum:
			if k.Type == gb.TypeT && k.Name == "label" {
				if l, ok := e.Value.(string); ok && strings.HasPrefix(l, "~") {
					return evalErr("%s: Label can not be a hidden key: %s", what, l)
				}
			}
			if k.Type == gb.TypeT && (k.Name == "id" || k.Name == "label") {
				continue
			}
			if edge && k.Type == gb.TypeDirection && (k.Name == "OUT" || k.Name == "IN") {
				continue
			}
			return evalErr("%s: invalid key %v", what, k)
		default:
			return evalErr("%s: keys must be strings, T.id, T.label%s; got %T", what, map[bool]string{true: ", Direction.OUT/IN", false: ""}[edge], e.Key)
		}
		if _, ok := e.Value.(*gb.P); ok {
			return evalErr("%s: predicates are not allowed in merge maps", what)
		}
	}
	return nil
}

// onCreateMap merges the search map with option(onCreate).
func onCreateMap(search, create *gb.Map, what string) (*gb.Map, error) {
	out := &gb.Map{Entries: append([]gb.MapEntry(nil), search.Entries...)}
	if create == nil {
		return out, nil
	}
	for _, e := range create.Entries {
		if v, ok := search.Get(e.Key); ok {
			if !mergeEqual(v, e.Value) {
				return nil, evalErr("option(onCreate) cannot override values from merge() argument: (%s, %s)", gremlinString(e.Key), gremlinString(e.Value))
			}
			continue
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

func (ec *execCtx) applyMap(tx *graph.Tx, t *trav, m *gb.Map, what string) error {
	for _, e := range m.Entries {
		if isT(e.Key, "id") || isT(e.Key, "label") {
			return evalErr("%s: option(onMatch) cannot set T.id or T.label", what)
		}
		k, ok := e.Key.(string)
		if !ok {
			return evalErr("%s: option(onMatch) keys must be strings, got %s", what, describe(e.Key))
		}
		if strings.HasPrefix(k, "~") {
			return evalErr("%s: Property key can not be a hidden key: %s", what, k)
		}
		val := e.Value
		card := graph.Single
		if cv, ok := val.(cardValue); ok {
			card, val = cv.card, cv.value
		}
		switch x := t.obj.(type) {
		case *graph.Vertex:
			if _, err := ec.g.SetVertexProperty(tx, x, card, k, val); err != nil {
				return evalErr("%v", err)
			}
		case *graph.Edge:
			if err := ec.g.SetEdgeProperty(tx, x, k, val); err != nil {
				return evalErr("%v", err)
			}
		}
	}
	return nil
}

func runMergeV(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	tx, err := ec.mut()
	if err != nil {
		return nil, err
	}
	if o, ok := s.option("onMatch"); ok {
		if m, ok := o.(*gb.Map); ok {
			if err := validateOnMatch(m); err != nil {
				return nil, err
			}
		}
	}
	var out []*trav
	for _, t := range in {
		var search *gb.Map
		if len(s.args) == 0 {
			m, ok := t.obj.(*gb.Map)
			if !ok {
				return nil, evalErr("mergeV() without an argument needs a map traverser")
			}
			search = m
		} else if search, err = ec.mergeMap(s.args[0], t, "mergeV()"); err != nil {
			return nil, err
		}
		if search == nil {
			search = &gb.Map{}
		}
		search = ec.inWritePartition(search)
		if err := validateMergeKeys(search, false, "mergeV()"); err != nil {
			return nil, err
		}
		var matches []*graph.Vertex
		if id, ok := search.Get(tID); ok {
			if v := ec.g.Vertex(idArg(id)); v != nil && vertexMatches(v, search) {
				matches = []*graph.Vertex{v}
			}
		} else {
			var hints []hint
			for _, e := range search.Entries {
				if k, ok := e.Key.(string); ok {
					hints = append(hints, hint{key: k, values: []any{e.Value}})
				} else if isT(e.Key, "label") {
					if l, ok := e.Value.(string); ok {
						hints = append(hints, hint{labels: []string{l}})
					}
				}
			}
			for _, v := range ec.candidates(hints) {
				if err := ec.tick(); err != nil {
					return nil, err
				}
				if vertexMatches(v, search) {
					matches = append(matches, v)
				}
			}
		}
		if len(matches) == 0 {
			var create *gb.Map
			if o, ok := s.option("onCreate"); ok {
				if create, err = ec.mergeMap(o, t, "option(onCreate)"); err != nil {
					return nil, err
				}
				if err := validateMergeKeys(create, false, "option(onCreate)"); err != nil {
					return nil, err
				}
			}
			full, err := onCreateMap(search, create, "mergeV")
			if err != nil {
				return nil, err
			}
			var id any
			label := "vertex"
			if v, ok := full.Get(tID); ok {
				id = idArg(v)
			}
			if v, ok := full.Get(tLabel); ok {
				l, ok := v.(string)
				if !ok {
					return nil, evalErr("mergeV(): T.label must be a string")
				}
				label = l
			}
			v, err := ec.g.AddVertex(tx, id, label)
			if err != nil {
				return nil, evalErr("%v", err)
			}
			for _, e := range full.Entries {
				k, ok := e.Key.(string)
				if !ok {
					continue
				}
				val := e.Value
				card := graph.Single
				if cv, ok := val.(cardValue); ok {
					card, val = cv.card, cv.value
				}
				if _, err := ec.g.SetVertexProperty(tx, v, card, k, val); err != nil {
					return nil, evalErr("%v", err)
				}
			}
			out = append(out, t.split(v))
			continue
		}
		for _, v := range matches {
			nt := t.split(v)
			if o, ok := s.option("onMatch"); ok {
				ot, err := onMatchTraverser(s, o, t, nt, "MergeVertexStep")
				if err != nil {
					return nil, err
				}
				m, err := ec.mergeMap(o, ot, "option(onMatch)")
				if err != nil {
					return nil, err
				}
				if err := validateOnMatch(m); err != nil {
					return nil, err
				}
				if m != nil {
					if err := ec.applyMap(tx, nt, m, "mergeV()"); err != nil {
						return nil, err
					}
				}
			}
			out = append(out, nt)
		}
	}
	return out, nil
}

// mergeEndpoint resolves a Direction.OUT/IN value of a mergeE() map to a
// vertex: Merge.outV/inV (the option's traversal or value: a vertex, or a map
// the vertex must match), a vertex, or a vertex id. A vertex id that does
// not exist resolves to nil (the search then matches nothing and creating
// the edge fails, as in TinkerPop).
func (ec *execCtx) mergeEndpoint(s *step, t *trav, v any, which string) (*graph.Vertex, error) {
	if e, ok := v.(gb.Enum); ok && e.Type == gb.TypeMerge {
		o, ok := s.option(e.Name)
		if !ok {
			return nil, evalErr("option(%s) must be specified if it is used for %s", e.Name, which)
		}
		r := o
		if c, isTrav := o.(*Traversal); isTrav {
			first, ok, err := ec.first(c, t)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, evalErr("Could not resolve vertex for option(%s)", e.Name)
			}
			r = first
		}
		switch x := r.(type) {
		case *graph.Vertex:
			return x, nil
		case *gb.Vertex:
			if gv := ec.g.Vertex(x.ID); gv != nil {
				return gv, nil
			}
			return nil, evalErr("Vertex could not be resolved from mergeE: v[%v]", x.ID)
		case *gb.Map:
			var found *graph.Vertex
			for _, cand := range ec.g.Vertices() {
				if vertexMatches(cand, x) {
					if found != nil {
						return nil, evalErr("mergeE(): option(Merge.%s) matched more than one vertex", e.Name)
					}
					found = cand
				}
			}
			if found == nil {
				return nil, evalErr("mergeE(): option(Merge.%s) matched no vertex", e.Name)
			}
			return found, nil
		}
		return nil, evalErr("Vertex could not be resolved from mergeE: %s", gremlinString(r))
	}
	if gv, ok := v.(*graph.Vertex); ok {
		return gv, nil
	}
	return ec.g.Vertex(idArg(v)), nil
}

// mergeEqual is Objects.equals for merge map values: elements are equal
// when their ids are.
func mergeEqual(a, b any) bool {
	switch a.(type) {
	case *gb.Vertex, *graph.Vertex, *gb.Edge, *graph.Edge:
		switch b.(type) {
		case *gb.Vertex, *graph.Vertex, *gb.Edge, *graph.Edge:
			return equal(idArg(a), idArg(b))
		}
	}
	return equal(a, b)
}

func edgeMatches(e *graph.Edge, m *gb.Map, out, in *graph.Vertex) bool {
	if out != nil && e.Out != out {
		return false
	}
	if in != nil && e.In != in {
		return false
	}
	for _, en := range m.Entries {
		switch {
		case isT(en.Key, "id"):
			if !equal(e.ID, normID(en.Value)) {
				return false
			}
		case isT(en.Key, "label"):
			if e.Label != en.Value {
				return false
			}
		case isDir(en.Key, "OUT"), isDir(en.Key, "IN"):
		default:
			k, _ := en.Key.(string)
			v, ok := e.Property(k)
			if !ok || !equal(v, en.Value) {
				return false
			}
		}
	}
	return true
}

func runMergeE(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	tx, err := ec.mut()
	if err != nil {
		return nil, err
	}
	if o, ok := s.option("onMatch"); ok {
		if m, ok := o.(*gb.Map); ok {
			if err := validateOnMatch(m); err != nil {
				return nil, err
			}
		}
	}
	var out []*trav
	for _, t := range in {
		var search *gb.Map
		if len(s.args) == 0 {
			m, ok := t.obj.(*gb.Map)
			if !ok {
				return nil, evalErr("mergeE() without an argument needs a map traverser")
			}
			search = m
		} else if search, err = ec.mergeMap(s.args[0], t, "mergeE()"); err != nil {
			return nil, err
		}
		if search == nil {
			search = &gb.Map{}
		}
		search = ec.inWritePartition(search)
		if err := validateMergeKeys(search, true, "mergeE()"); err != nil {
			return nil, err
		}
		var outV, inV *graph.Vertex
		// missing: a Direction names a vertex id that does not exist, so
		// no edge matches.
		missing := false
		if v, ok := search.Get(dirOut); ok {
			if outV, err = ec.mergeEndpoint(s, t, v, "OUT"); err != nil {
				return nil, err
			}
			missing = outV == nil
		}
		if v, ok := search.Get(dirIn); ok {
			if inV, err = ec.mergeEndpoint(s, t, v, "IN"); err != nil {
				return nil, err
			}
			missing = missing || inV == nil
		}
		var matches []*graph.Edge
		if missing {
		} else if id, ok := search.Get(tID); ok {
			if e := ec.g.Edge(idArg(id)); e != nil && edgeMatches(e, search, outV, inV) {
				matches = []*graph.Edge{e}
			}
		} else {
			var cands []*graph.Edge
			switch {
			case outV != nil:
				cands = outV.OutEdges()
			case inV != nil:
				cands = inV.InEdges()
			default:
				cands = ec.g.Edges()
			}
			for _, e := range cands {
				if edgeMatches(e, search, outV, inV) {
					matches = append(matches, e)
				}
			}
		}
		if len(matches) == 0 {
			var create *gb.Map
			if o, ok := s.option("onCreate"); ok {
				if create, err = ec.mergeMap(o, t, "option(onCreate)"); err != nil {
					return nil, err
				}
				if err := validateMergeKeys(create, true, "option(onCreate)"); err != nil {
					return nil, err
				}
			}
			full, err := onCreateMap(search, create, "mergeE")
			if err != nil {
				return nil, err
			}
			for _, d := range []struct {
				key  gb.Enum
				v    **graph.Vertex
				name string
			}{{dirOut, &outV, "Out"}, {dirIn, &inV, "In"}} {
				v, ok := full.Get(d.key)
				if !ok {
					return nil, evalErr("%s Vertex not specified in onCreate - edge cannot be created", d.name)
				}
				if *d.v != nil {
					continue
				}
				if *d.v, err = ec.mergeEndpoint(s, t, v, d.key.Name); err != nil {
					return nil, err
				}
				if *d.v == nil {
					return nil, evalErr("Vertex id could not be resolved from mergeE: %s", gremlinString(idArg(v)))
				}
			}
			var id any
			label := "edge"
			if v, ok := full.Get(tID); ok {
				id = idArg(v)
			}
			if v, ok := full.Get(tLabel); ok {
				l, ok := v.(string)
				if !ok {
					return nil, evalErr("mergeE(): T.label must be a string")
				}
				label = l
			}
			e, err := ec.g.AddEdge(tx, id, label, outV, inV)
			if err != nil {
				return nil, evalErr("%v", err)
			}
			for _, en := range full.Entries {
				if k, ok := en.Key.(string); ok {
					if err := ec.g.SetEdgeProperty(tx, e, k, en.Value); err != nil {
						return nil, evalErr("%v", err)
					}
				}
			}
			out = append(out, t.split(e))
			continue
		}
		for _, e := range matches {
			nt := t.split(e)
			if o, ok := s.option("onMatch"); ok {
				ot, err := onMatchTraverser(s, o, t, nt, "MergeEdgeStep")
				if err != nil {
					return nil, err
				}
				m, err := ec.mergeMap(o, ot, "option(onMatch)")
				if err != nil {
					return nil, err
				}
				if err := validateOnMatch(m); err != nil {
					return nil, err
				}
				if err != nil {
					return nil, err
				}
				if m != nil {
					if err := ec.applyMap(tx, nt, m, "mergeE()"); err != nil {
						return nil, err
					}
				}
			}
			out = append(out, nt)
		}
	}
	return out, nil
}
