package scripted

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/worldgate/worldgate/shared/llm"
)

// argsFor makes arguments for a tool call that validate against the tool's
// input schema, filled from what the prompt mentions. variant > 0 asks for a
// different call to the same tool (another search query).
func argsFor(t llm.Tool, f *facts, rng *rand.Rand, variant int) json.RawMessage {
	var schema map[string]any
	if len(t.InputSchema) == 0 || json.Unmarshal(t.InputSchema, &schema) != nil {
		return json.RawMessage(`{}`)
	}
	g := argGen{f: f, rng: rng, root: schema, noun: toolNoun(t.Name), variant: variant}
	b := g.object(schema)
	// Fall back to the required properties only, if the full guess does not
	// validate (e.g. an unsupported keyword constrained an optional one).
	if llm.ValidateJSON(t.InputSchema, b) != nil {
		g.requiredOnly = true
		b = g.object(schema)
	}
	return b
}

// object is the arguments for schema: always a JSON object (MCP tool arguments are one), never
// a bare value, whatever the schema's alternatives made of the guess.
func (g *argGen) object(schema map[string]any) json.RawMessage {
	v, ok := g.value("", schema, 0).(map[string]any)
	if !ok {
		return json.RawMessage(`{}`)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

// toolNoun is what a tool is about: "get-location" -> "location",
// "get-player-state" -> "player".
func toolNoun(name string) string {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	for _, w := range words {
		switch w {
		case "get", "list", "search", "find", "fetch", "read", "query", "recent", "state", "canonical", "classify", "moderate":
			continue
		}
		return strings.TrimSuffix(w, "s")
	}
	return ""
}

type argGen struct {
	f            *facts
	rng          *rand.Rand
	root         map[string]any
	noun         string
	variant      int
	requiredOnly bool
}

func (g *argGen) resolve(s map[string]any) map[string]any {
	for range 8 {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		next := lookupRef(g.root, ref)
		if next == nil {
			return s
		}
		s = next
	}
	return s
}

func lookupRef(root map[string]any, ref string) map[string]any {
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	var cur any = root
	for _, part := range strings.Split(ref[2:], "/") {
		part = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	m, _ := cur.(map[string]any)
	return m
}

func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if str, ok := e.(string); ok && str != "null" {
				return str
			}
		}
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	if _, ok := s["items"]; ok {
		return "array"
	}
	return "string"
}

func (g *argGen) value(name string, s map[string]any, depth int) any {
	s = g.resolve(s)
	if c, ok := s["const"]; ok {
		return c
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[g.rng.IntN(len(enum))]
	}
	s, exclude, resolved := g.pickRequired(s)
	if !resolved {
		for _, k := range []string{"anyOf", "oneOf"} {
			if alts, ok := s[k].([]any); ok && len(alts) > 0 {
				// Only an alternative that is a whole schema stands for the value; one that
				// only constrains it (required, an anchor) does not say it is a string.
				if m, ok := alts[0].(map[string]any); ok && describesValue(m) {
					return g.value(name, m, depth+1)
				}
			}
		}
	}
	if depth > 6 {
		return nil
	}
	switch schemaType(s) {
	case "object":
		props, _ := s["properties"].(map[string]any)
		req := stringSet(s["required"])
		out := map[string]any{}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ps, _ := props[k].(map[string]any)
			if ps == nil {
				ps = map[string]any{}
			}
			required := slices.Contains(req, k)
			if !required && (g.requiredOnly || g.hint(k) == "" || slices.Contains(exclude, k)) {
				continue // optional and nothing to say about it
			}
			if v := g.value(k, ps, depth+1); v != nil {
				out[k] = v
			}
		}
		if len(out) == 0 && len(req) == 0 && !g.requiredOnly {
			// Nothing required and nothing hinted ("give factId or topic"): a call with no
			// arguments asks nothing, so ask by the first free-text property.
			for _, k := range keys {
				if ps, _ := props[k].(map[string]any); ps != nil && freeText(k) && schemaType(g.resolve(ps)) == "string" {
					out[k] = g.value(k, ps, depth+1)
					break
				}
			}
		}
		return out
	case "array":
		items, _ := s["items"].(map[string]any)
		if items == nil {
			items = map[string]any{}
		}
		n := max(1, intKw(s, "minItems", 1))
		out := make([]any, 0, n)
		for range n {
			out = append(out, g.value(name, items, depth+1))
		}
		return out
	case "integer", "number":
		return g.number(name, s)
	case "boolean":
		return strings.HasPrefix(strings.ToLower(name), "include")
	default:
		return g.str(name, s)
	}
}

func (g *argGen) number(name string, s map[string]any) any {
	lo, hasLo := numKw(s, "minimum")
	hi, hasHi := numKw(s, "maximum")
	n := strings.ToLower(name)
	v := 1.0
	switch {
	case strings.Contains(n, "limit") || n == "k" || n == "n" || strings.Contains(n, "count") || strings.HasPrefix(n, "max") || strings.Contains(n, "top"):
		v = 5
	case strings.Contains(n, "depth") || strings.Contains(n, "radius"):
		v = float64(1 + g.rng.IntN(2))
	case strings.Contains(n, "offset") || strings.Contains(n, "skip"):
		v = 0
	}
	if hasLo && v < lo {
		v = lo
	}
	if hasHi && v > hi {
		v = hi
	}
	if schemaType(s) == "integer" {
		return int64(v)
	}
	return v
}

// pickRequired handles an object whose anyOf/oneOf alternatives only say which
// properties are required ("give factId or topic"): it picks one alternative
// and returns the object schema with that alternative's properties required,
// and the properties only the other alternatives require, to leave out. It
// picks the first alternative the prompt has values for, else one asking for
// free text rather than an id, which is easier to guess. Other schemas come
// back unchanged and resolved false.
func (g *argGen) pickRequired(s map[string]any) (out map[string]any, exclude []string, resolved bool) {
	if _, ok := s["properties"].(map[string]any); !ok {
		return s, nil, false
	}
	var alts [][]string
	for _, k := range []string{"oneOf", "anyOf"} {
		list, _ := s[k].([]any)
		for _, a := range list {
			m, ok := a.(map[string]any)
			if !ok || !onlyRequires(m) {
				return s, nil, false
			}
			alts = append(alts, stringSet(m["required"]))
		}
	}
	if len(alts) == 0 {
		return s, nil, false
	}
	hinted := func(props []string) bool {
		for _, p := range props {
			if g.hint(p) == "" {
				return false
			}
		}
		return true
	}
	idLike := func(props []string) bool {
		return slices.ContainsFunc(props, func(p string) bool { return strings.HasSuffix(norm(p), "id") })
	}
	pick := slices.IndexFunc(alts, hinted)
	if pick < 0 {
		pick = max(0, slices.IndexFunc(alts, func(props []string) bool { return !idLike(props) }))
	}
	out = make(map[string]any, len(s))
	for k, v := range s {
		if k != "oneOf" && k != "anyOf" {
			out[k] = v
		}
	}
	req := stringSet(s["required"])
	for i, props := range alts {
		for _, p := range props {
			switch {
			case i == pick && !slices.Contains(req, p):
				req = append(req, p)
			case i != pick && !slices.Contains(alts[pick], p):
				exclude = append(exclude, p)
			}
		}
	}
	reqAny := make([]any, len(req))
	for i, p := range req {
		reqAny[i] = p
	}
	out["required"] = reqAny
	return out, exclude, true
}

// onlyRequires reports whether an alternative of a oneOf/anyOf says only which properties are
// required, besides annotations that constrain nothing (mcp-lore's get-canonical-fact names its
// alternatives with $anchor: {"$anchor": "topic-alone", "required": ["topic"]}).
func onlyRequires(alt map[string]any) bool {
	if alt["required"] == nil {
		return false
	}
	for k := range alt {
		switch k {
		case "required", "$anchor", "$comment", "title", "description":
		default:
			return false
		}
	}
	return true
}

// describesValue reports whether a subschema says what kind of value it is, rather than only
// constraining one.
func describesValue(s map[string]any) bool {
	for _, k := range []string{"type", "properties", "items", "$ref", "const", "enum", "anyOf", "oneOf", "allOf"} {
		if _, ok := s[k]; ok {
			return true
		}
	}
	return false
}

// hint finds a value the prompt gives for a property: "locationId" matches
// locationId / location_id / location; "id" on get-location matches
// locationId.
func (g *argGen) hint(prop string) string {
	p := norm(prop)
	cands := []string{p}
	if g.noun != "" && (p == "id" || p == "name") {
		cands = append(cands, g.noun+p, g.noun)
	}
	if base, ok := strings.CutSuffix(p, "id"); ok && base != "" {
		cands = append(cands, base, base+"name")
	}
	for _, c := range cands {
		if v := g.f.kv[c]; len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// freeText reports whether a property takes a search phrase rather than an id.
func freeText(name string) bool {
	switch norm(name) {
	case "query", "q", "topic", "search", "keywords", "subject", "term":
		return true
	}
	return false
}

func (g *argGen) str(name string, s map[string]any) string {
	n := norm(name)
	v := g.hint(name)
	switch {
	case freeText(name):
		v = g.query()
	case n == "text" || n == "utterance" || n == "message" || n == "content" || n == "input":
		if g.f.utterance != "" {
			v = g.f.utterance
		} else if v == "" {
			v = g.query()
		}
	case v == "" && strings.HasSuffix(n, "id"):
		v = "unknown"
	case v == "":
		v = g.query()
	}
	minLen := intKw(s, "minLength", 0)
	for len([]rune(v)) < minLen {
		v += " " + g.f.place()
	}
	if maxLen := intKw(s, "maxLength", 0); maxLen > 0 {
		if r := []rune(v); len(r) > maxLen {
			v = string(r[:maxLen])
		}
	}
	return v
}

// query is a search phrase about the scene; variants pick other subjects.
func (g *argGen) query() string {
	var subjects []string
	subjects = append(subjects, g.f.names...)
	if id := g.f.first("locationId", "location"); id != "" {
		addU(&subjects, humanize(id))
	}
	subjects = append(subjects, g.f.npcs...)
	subjects = append(subjects, g.f.items...)
	if len(subjects) == 0 {
		subjects = []string{"local history", "rumours", "old legends", "the roads"}
	}
	s := subjects[g.variant%len(subjects)]
	if g.variant >= len(subjects) {
		extra := []string{"history", "legends", "rumours", "dangers", "festivals"}
		s += " " + extra[(g.variant/len(subjects))%len(extra)]
	}
	return s
}

func stringSet(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func numKw(s map[string]any, k string) (float64, bool) {
	f, ok := s[k].(float64)
	return f, ok
}

func intKw(s map[string]any, k string, def int) int {
	if f, ok := s[k].(float64); ok {
		return int(f)
	}
	return def
}
