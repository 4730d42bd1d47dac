package traversal

import (
	"fmt"
	"strconv"

	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

var builders map[string]stepFn

func init() {
	builders = map[string]stepFn{
		"V": runV, "E": runE, "inject": runInject,
		"addV": runAddV, "addE": runAddE, "property": runProperty, "drop": runDrop,
		"mergeV": runMergeV, "mergeE": runMergeE,
		"has": runHas, "hasLabel": runHasLabel, "hasId": runHasID, "hasNot": runHasNot,
		"hasKey": runHasKey, "hasValue": runHasValue, "is": runIs,
		"out": runAdj, "in": runAdj, "both": runAdj,
		"outE": runAdj, "inE": runAdj, "bothE": runAdj,
		"outV": runEdgeV, "inV": runEdgeV, "bothV": runEdgeV, "otherV": runEdgeV,
		"values": runValues, "properties": runProperties, "valueMap": runValueMap,
		"elementMap": runElementMap, "id": runID, "label": runLabel, "key": runKey, "value": runValue,
		"count": runCount, "sum": runReduce, "min": runReduce, "max": runReduce, "mean": runReduce,
		"limit": runRange, "range": runRange, "skip": runRange, "tail": runRange,
		"order": runOrder, "dedup": runDedup, "fold": runFold, "unfold": runUnfold,
		"coalesce": runCoalesce, "optional": runOptional, "constant": runConstant,
		"union": runUnion, "choose": runChoose, "branch": runChoose, "where": runWhere,
		"not": runNot, "and": runAnd, "or": runOr,
		"select": runSelect, "project": runProject, "path": runPath,
		"simplePath": runSimplePath, "cyclicPath": runSimplePath,
		"repeat": runRepeat, "loops": runLoops,
		"group": runGroup, "groupCount": runGroupCount,
		"sideEffect": runSideEffect, "aggregate": runAggregate, "store": runAggregate, "cap": runCap,
		"fail": runFail, "identity": runIdentity, "local": runLocal, "barrier": runBarrier, "sack": runSack,
		"none": runNone, "discard": runNone, "timeLimit": runIdentity,
		"flatMap": runLocal, "map": runMap, "filter": runFilter, "element": runElement,
		"toUpper": runStringStep, "toLower": runStringStep, "trim": runStringStep, "length": runStringStep,
		"lTrim": runStringStep, "rTrim": runStringStep, "substring": runStringStep, "replace": runStringStep,
		"split": runStringStep, "format": runFormat,
		"asString": runString, "concat": runConcat,
		"combine": runListOp, "merge": runListOp, "difference": runListOp, "intersect": runListOp,
		"disjunct": runListOp, "product": runListOp, "conjoin": runConjoin,
		"any": runAnyAll, "all": runAnyAll, "reverse": runReverse, "index": runIndex,
		"coin": runCoin, "sample": runSample, "math": runMath, "match": runMatch, "call": runCall,
		"asDate": runAsDate, "dateAdd": runDateAdd, "dateDiff": runDateDiff,
		"io": runIO,
	}
}

func runIdentity(_ *execCtx, _ *step, in []*trav) ([]*trav, error) { return in, nil }
func runNone(_ *execCtx, _ *step, _ []*trav) ([]*trav, error)      { return nil, nil }

// ---- helpers ----

func elemID(o any) (any, bool) {
	switch x := o.(type) {
	case *graph.Vertex:
		return x.ID, true
	case *graph.Edge:
		return x.ID, true
	case *graph.VertexProperty:
		return x.ID, true
	}
	return nil, false
}

func elemLabel(o any) (string, bool) {
	switch x := o.(type) {
	case *graph.Vertex:
		return x.Label, true
	case *graph.Edge:
		return x.Label, true
	case *graph.VertexProperty:
		return x.Key, true
	}
	return "", false
}

// propValues returns the values of key on an element or map.
func propValues(o any, key string) []any {
	switch x := o.(type) {
	case *graph.Vertex:
		vps := x.Properties(key)
		out := make([]any, len(vps))
		for i, vp := range vps {
			out[i] = vp.Value
		}
		return out
	case *graph.Edge:
		if v, ok := x.Property(key); ok {
			return []any{v}
		}
	case *graph.VertexProperty:
		if v, ok := x.Meta(key); ok {
			return []any{v}
		}
	case *gb.Map:
		if v, ok := x.Get(key); ok {
			return []any{v}
		}
	}
	return nil
}

func tokenValue(o any, name string) (any, bool) {
	switch name {
	case "id":
		return elemID(o)
	case "label":
		l, ok := elemLabel(o)
		return l, ok
	case "key":
		switch x := o.(type) {
		case *graph.VertexProperty:
			return x.Key, true
		case *graph.Property:
			return x.Key, true
		case mapEntry:
			return x.k, true
		}
	case "value":
		switch x := o.(type) {
		case *graph.VertexProperty:
			return x.Value, true
		case *graph.Property:
			return x.Value, true
		case mapEntry:
			return x.v, true
		}
	}
	return nil, false
}

// byValue applies a by() modulator to an object.
func (ec *execCtx) byValue(b any, t *trav) (any, bool, error) {
	switch x := b.(type) {
	case nil:
		return t.obj, true, nil
	case string:
		vs := propValues(t.obj, x)
		if len(vs) == 0 {
			return nil, ec.productiveBy, nil
		}
		return vs[0], true, nil
	case gb.Enum:
		switch x.Type {
		case gb.TypeT:
			v, ok := tokenValue(t.obj, x.Name)
			return v, ok || ec.productiveBy, nil
		case gb.TypeColumn:
			return columnOf(t.obj, x.Name)
		case gb.TypeOrder:
			return t.obj, true, nil
		}
	case *Traversal:
		v, ok, err := ec.first(x, t)
		return v, ok || (err == nil && ec.productiveBy), err
	case byPair:
		return ec.byValue(x.key, t)
	}
	return nil, false, evalErr("unsupported by() modulator %v", b)
}

func columnOf(o any, name string) (any, bool, error) {
	switch x := o.(type) {
	case mapEntry:
		if name == "keys" {
			return x.k, true, nil
		}
		return x.v, true, nil
	case *gb.Map:
		out := make([]any, len(x.Entries))
		for i, e := range x.Entries {
			if name == "keys" {
				out[i] = e.Key
			} else {
				out[i] = e.Value
			}
		}
		if name == "keys" {
			return &gb.Set{Items: out}, true, nil
		}
		return out, true, nil
	case *pathValue:
		if name == "keys" {
			out := make([]any, len(x.labels))
			for i, l := range x.labels {
				s := make([]any, len(l))
				for j, e := range l {
					s[j] = e
				}
				out[i] = &gb.Set{Items: s}
			}
			return out, true, nil
		}
		return x.objs, true, nil
	}
	return nil, false, evalErr("Column.%s cannot be applied to %T", name, o)
}

func strArgs(s *step) ([]string, error) {
	out := make([]string, 0, len(s.args))
	for _, a := range s.args {
		str, ok := a.(string)
		if !ok {
			return nil, evalErr("%s() expects string arguments, got %T", s.op, a)
		}
		out = append(out, str)
	}
	return out, nil
}

// propertyKeys are the property keys of values()/properties()/valueMap()/
// elementMap(): a null key names no property (TinkerPop ignores it), so
// only null keys (none) select no property at all, where no keys select all.
func propertyKeys(op string, args []any) (keys []string, none bool, err error) {
	keys = make([]string, 0, len(args))
	for _, a := range args {
		if a == nil {
			continue
		}
		k, ok := a.(string)
		if !ok {
			return nil, false, evalErr("%s() expects property keys (strings), got %s", op, describe(a))
		}
		keys = append(keys, k)
	}
	return keys, len(args) > 0 && len(keys) == 0, nil
}

func scopeLocal(args []any) ([]any, bool) {
	if len(args) > 0 {
		if e, ok := args[0].(gb.Enum); ok && e.Type == gb.TypeScope {
			return args[1:], e.Name == "local"
		}
	}
	return args, false
}

// numericString parses an id given as a decimal string.
func numericString(v any) (int64, bool) {
	str, ok := v.(string)
	if !ok || str == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(str, 10, 64)
	return n, err == nil
}

// vertexByID looks a vertex up by id; a string that is not an id but a
// decimal number finds the vertex with that numeric id (as TinkerGraph's
// numeric id managers do).
func (ec *execCtx) vertexByID(id any) *graph.Vertex {
	if v := ec.g.Vertex(id); v != nil {
		return v
	}
	if n, ok := numericString(id); ok {
		return ec.g.Vertex(n)
	}
	return nil
}

// edgeByID is vertexByID for edges.
func (ec *execCtx) edgeByID(id any) *graph.Edge {
	if e := ec.g.Edge(id); e != nil {
		return e
	}
	if n, ok := numericString(id); ok {
		return ec.g.Edge(n)
	}
	return nil
}

func idArg(a any) any {
	switch x := a.(type) {
	case *gb.Vertex:
		return x.ID
	case *gb.Edge:
		return x.ID
	case *graph.Vertex:
		return x.ID
	case *graph.Edge:
		return x.ID
	}
	return a
}

func asList(o any) ([]any, bool) {
	switch x := o.(type) {
	case []any:
		return x, true
	case *gb.Set:
		return x.Items, true
	case *pathValue:
		return x.objs, true
	}
	return nil, false
}

func describe(o any) string {
	switch x := o.(type) {
	case *graph.Vertex:
		return fmt.Sprintf("v[%v]", x.ID)
	case *graph.Edge:
		return fmt.Sprintf("e[%v]", x.ID)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", o)
}

var (
	tID    = gb.Enum{Type: gb.TypeT, Name: "id"}
	tLabel = gb.Enum{Type: gb.TypeT, Name: "label"}
	dirIn  = gb.Enum{Type: gb.TypeDirection, Name: "IN"}
	dirOut = gb.Enum{Type: gb.TypeDirection, Name: "OUT"}
)
