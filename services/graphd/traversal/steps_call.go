package traversal

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// call(service[, params map][, params traversal]).with(key, value) as
// TinkerPop's CallStep with TinkerGraph's service registry: the directory
// ("--list", also call() without a name), tinker.search (a start service:
// the properties of vertices, edges and vertex properties whose value, as
// Java writes it, matches a regex) and tinker.degree.centrality (a streaming
// service: each vertex's edge count in a direction, IN by default). Any other
// name is refused as TinkerPop refuses it ("Unrecognized service").

const directoryService = "--list"

// service is one entry of graphd's service registry.
type service struct {
	name   string
	kind   string // Start or Streaming (TinkerPop's Service.Type)
	params [][2]string
	start  func(ec *execCtx, params *gb.Map) ([]any, error)
	stream func(ec *execCtx, t *trav, params *gb.Map) ([]any, error)
}

// services in registration order (the directory lists them so).
var services = []*service{
	{name: "tinker.search", kind: "Start", params: [][2]string{
		{"search", "Specify a search term - will be converted to regex via .*(search).*"},
		{"regex", "Directly specify the regex"},
		{"type", "Specify the type of Element to search for, one of Vertex/Edge/VertexProperty (optional)"},
	}, start: searchService},
	{name: "tinker.degree.centrality", kind: "Streaming", params: [][2]string{
		{"direction", "Specify the edge direction (optional), default is Direction.IN"},
	}, stream: degreeService},
}

func lookupService(name string) *service {
	for _, s := range services {
		if s.name == name {
			return s
		}
	}
	return nil
}

func validateCall(s *step) error {
	if len(s.args) > 3 {
		return evalErr("call() takes a service name, a map and a traversal")
	}
	if len(s.args) == 0 {
		return nil
	}
	name, ok := s.args[0].(string)
	if !ok && s.args[0] != nil {
		return evalErr("call() expects a service name (a string), got %s", describe(s.args[0]))
	}
	if name != "" && name != directoryService && lookupService(name) == nil {
		return evalErr("Unrecognized service: %s", name)
	}
	for _, a := range s.args[1:] {
		switch a.(type) {
		case *gb.Map, *Traversal, nil:
		default:
			return evalErr("call(%s) expects a map or a traversal of parameters, got %s", name, describe(a))
		}
	}
	return nil
}

func runCall(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	name := directoryService
	if len(s.args) > 0 {
		if n, ok := s.args[0].(string); ok && n != "" {
			name = n
		}
	}
	svc := lookupService(name)
	if s.rootStart {
		if svc != nil && svc.start == nil {
			return nil, evalErr("This service cannot be used to start a traversal.")
		}
		var out []*trav
		for _, t := range in {
			params, err := ec.callParams(s, t)
			if err != nil {
				return nil, err
			}
			var vals []any
			if svc == nil {
				vals, err = directory(params)
			} else {
				vals, err = svc.start(ec, params)
			}
			if err != nil {
				return nil, err
			}
			for _, v := range vals {
				out = append(out, fresh(v))
			}
		}
		return out, ec.checkSize(len(out))
	}
	if svc == nil {
		return nil, evalErr("Directory service can only be used to start a traversal.")
	}
	if svc.stream == nil {
		return nil, evalErr("This service cannot be used mid-traversal.")
	}
	var out []*trav
	for _, t := range in {
		params, err := ec.callParams(s, t)
		if err != nil {
			return nil, err
		}
		vals, err := svc.stream(ec, t, params)
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			out = append(out, t.split(v))
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// callParams merges the static map, the map the parameter traversal gives
// and the with() parameters (later ones override), as CallStep does.
func (ec *execCtx) callParams(s *step, t *trav) (*gb.Map, error) {
	params := &gb.Map{}
	put := func(k, v any) {
		for i, e := range params.Entries {
			if equal(e.Key, k) {
				params.Entries[i].Value = v
				return
			}
		}
		params.Entries = append(params.Entries, gb.MapEntry{Key: k, Value: v})
	}
	for _, a := range s.args[min(1, len(s.args)):] {
		switch x := a.(type) {
		case *gb.Map:
			for _, e := range x.Entries {
				put(e.Key, e.Value)
			}
		case *Traversal:
			v, ok, err := ec.first(x, t)
			if err != nil {
				return nil, err
			}
			m, isMap := v.(*gb.Map)
			if !ok || !isMap {
				return nil, evalErr("call(): the parameter traversal must produce a map, got %s", describe(v))
			}
			for _, e := range m.Entries {
				put(e.Key, e.Value)
			}
		}
	}
	with := s.mods().with
	keys := make([]string, 0, len(with))
	for k := range with {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := with[k]
		if c, ok := v.(*Traversal); ok {
			r, ok, err := ec.first(c, t)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, evalErr("The provided traverser does not map to a value: with(%s, traversal)", k)
			}
			v = r
		}
		put(k, v)
	}
	return params, nil
}

func stringParam(params *gb.Map, key string) (string, bool, error) {
	v, ok := params.Get(key)
	if !ok || v == nil {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", false, evalErr("call(): parameter %s must be a String, got %s", key, describe(v))
	}
	return s, true, nil
}

// directory is the "--list" service: the registered services' names, or
// with verbose their descriptions (JSON, as Jackson writes them).
func directory(params *gb.Map) ([]any, error) {
	only, _, err := stringParam(params, "service")
	if err != nil {
		return nil, err
	}
	verbose := false
	if v, ok := params.Get("verbose"); ok {
		b, isBool := v.(bool)
		if !isBool {
			return nil, evalErr("call(--list): parameter verbose must be a Boolean, got %s", describe(v))
		}
		verbose = b
	}
	var out []any
	for _, s := range services {
		if only != "" && s.name != only {
			continue
		}
		if !verbose {
			out = append(out, s.name)
			continue
		}
		var sb strings.Builder
		q := func(s string) { b, _ := json.Marshal(s); sb.Write(b) }
		sb.WriteString(`{"name":`)
		q(s.name)
		sb.WriteString(`,"type:[requirements]:":{`)
		q(s.kind)
		sb.WriteString(`:[]},"params":{`)
		for i, p := range s.params {
			if i > 0 {
				sb.WriteString(",")
			}
			q(p[0])
			sb.WriteString(":")
			q(p[1])
		}
		sb.WriteString("}}")
		out = append(out, sb.String())
	}
	return out, nil
}

// searchService is TinkerGraph's tinker.search (TinkerHelper.search): the
// properties of the vertices, edges and vertex properties (or of one type)
// whose value's Java string fully matches the regex (search s: .*(s).*).
func searchService(ec *execCtx, params *gb.Map) ([]any, error) {
	re, hasRe, err := stringParam(params, "regex")
	if err != nil {
		return nil, err
	}
	if !hasRe {
		s, ok, err := stringParam(params, "search")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, evalErr("Missing search/regex parameter")
		}
		re = ".*(" + s + ").*"
	}
	typ, _, err := stringParam(params, "type")
	if err != nil {
		return nil, err
	}
	switch typ {
	case "", "Vertex", "Edge", "VertexProperty":
	default:
		return nil, evalErr("Type must be one of Vertex/Edge/VertexProperty: %s", typ)
	}
	pat, err := regexp.Compile(`\A(?:` + re + `)\z`)
	if err != nil {
		return nil, evalErr("tinker.search: the regex %s uses Java regex syntax graphd does not support: %v", re, err)
	}
	var out []any
	match := func(v any) (bool, error) {
		s := gremlinString(v)
		if err := javaRegexSafe(re, s); err != nil {
			return false, err
		}
		return pat.MatchString(s), nil
	}
	vertices := func() error {
		for _, v := range ec.g.Vertices() {
			for _, k := range v.Keys() {
				for _, vp := range v.Properties(k) {
					ok, err := match(vp.Value)
					if err != nil {
						return err
					}
					if ok {
						out = append(out, vp)
					}
				}
			}
			if err := ec.tick(); err != nil {
				return err
			}
		}
		return nil
	}
	edges := func() error {
		for _, e := range ec.g.Edges() {
			for _, k := range e.Keys() {
				v, _ := e.Property(k)
				ok, err := match(v)
				if err != nil {
					return err
				}
				if ok {
					out = append(out, &graph.Property{Key: k, Value: v, Edge: e})
				}
			}
			if err := ec.tick(); err != nil {
				return err
			}
		}
		return nil
	}
	metas := func() error {
		for _, v := range ec.g.Vertices() {
			for _, k := range v.Keys() {
				for _, vp := range v.Properties(k) {
					for _, mk := range vp.MetaKeys() {
						mv, _ := vp.Meta(mk)
						ok, err := match(mv)
						if err != nil {
							return err
						}
						if ok {
							out = append(out, &graph.Property{Key: mk, Value: mv, VP: vp})
						}
					}
				}
			}
			if err := ec.tick(); err != nil {
				return err
			}
		}
		return nil
	}
	var scans []func() error
	switch typ {
	case "Vertex":
		scans = []func() error{vertices}
	case "Edge":
		scans = []func() error{edges}
	case "VertexProperty":
		scans = []func() error{metas}
	default:
		scans = []func() error{vertices, edges, metas}
	}
	for _, scan := range scans {
		if err := scan(); err != nil {
			return nil, err
		}
		if err := ec.checkSize(len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

var caseInsensitiveFlag = regexp.MustCompile(`\(\?[a-zA-Z]*i`)

// javaRegexSafe refuses the few inputs where Go's regexp and
// java.util.regex could disagree on a pattern both accept: '.', \s and
// negated classes around Java's other line terminators and \x0B, and
// case-insensitive matching (ASCII only in Java) of non-ASCII text.
func javaRegexSafe(re, s string) error {
	if strings.ContainsAny(s, "\r\v\u0085\u2028\u2029") && strings.ContainsAny(re, `.\[`) {
		return evalErr("tinker.search: matching %q against a value with a line terminator or vertical tab is not supported by graphd", re)
	}
	if caseInsensitiveFlag.MatchString(re) {
		for _, r := range s {
			if r > 0x7F {
				return evalErr("tinker.search: case-insensitive matching of non-ASCII text is not supported by graphd")
			}
		}
	}
	return nil
}

// degreeService is TinkerGraph's tinker.degree.centrality: the number of
// the vertex's edges in the direction (IN by default), a Long.
func degreeService(_ *execCtx, t *trav, params *gb.Map) ([]any, error) {
	dir := "IN"
	if v, ok := params.Get("direction"); ok {
		e, isDir := v.(gb.Enum)
		if !isDir || e.Type != gb.TypeDirection {
			return nil, evalErr("tinker.degree.centrality: direction must be a Direction, got %s", describe(v))
		}
		dir = e.Name
	}
	v, ok := t.obj.(*graph.Vertex)
	if !ok {
		return nil, evalErr("tinker.degree.centrality requires a vertex, got %s", describe(t.obj))
	}
	var n int64
	switch dir {
	case "OUT":
		n = int64(len(v.OutEdges()))
	case "IN":
		n = int64(len(v.InEdges()))
	case "BOTH":
		n = int64(len(v.OutEdges()) + len(v.InEdges()))
	default:
		return nil, evalErr("tinker.degree.centrality: unknown direction %s", dir)
	}
	return []any{n}, nil
}
