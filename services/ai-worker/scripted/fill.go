package scripted

import (
	"fmt"
	"slices"
	"strings"
)

// synonyms group the property names an output schema may use for the same
// piece of content. A property is filled from the first key of its group
// that the content has.
var synonyms = [][]string{
	{"text", "description", "narration", "ambience", "prose", "content", "body", "passage", "scene"},
	{"line", "dialogue", "utterance", "speech", "reply", "say", "response", "text", "message"},
	{"mood", "tone", "atmosphere", "feeling"},
	{"intent", "action", "intention"},
	{"speaker", "npc", "npcname", "character", "name"},
	{"title", "name", "questname", "questtitle"},
	{"hook", "summary", "premise", "pitch", "description", "setup", "text"},
	{"objectives", "steps", "tasks", "goals", "stages"},
}

func semIndex(sem map[string]any) map[string]any {
	out := make(map[string]any, len(sem))
	for k, v := range sem {
		out[norm(k)] = v
	}
	return out
}

// filler builds a JSON value for an output schema from the written content
// (sem) and, for properties the content does not cover, from the facts.
type filler struct {
	w    *writer
	sem  map[string]any
	root map[string]any
}

func (fl *filler) lookup(name string) (any, bool) {
	n := norm(name)
	if v, ok := fl.sem[n]; ok {
		return v, true
	}
	for _, g := range synonyms {
		if !slices.Contains(g, n) {
			continue
		}
		for _, k := range g {
			if v, ok := fl.sem[k]; ok {
				return v, true
			}
		}
	}
	return nil, false
}

func (fl *filler) gen() *argGen {
	return &argGen{f: fl.w.f, rng: fl.w.rng, root: fl.root}
}

func (fl *filler) fill(name string, s map[string]any, depth int) any {
	g := fl.gen()
	s = g.resolve(s)
	if c, ok := s["const"]; ok {
		return c
	}
	sv, has := fl.lookup(name)
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		if has {
			for _, e := range enum {
				if fmt.Sprint(e) == fmt.Sprint(sv) {
					return e
				}
			}
		}
		return enum[fl.w.rng.IntN(len(enum))]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			for _, a := range alts {
				if m, ok := a.(map[string]any); ok && schemaType(m) != "null" {
					return fl.fill(name, m, depth+1)
				}
			}
		}
	}
	if depth > 8 {
		return nil
	}
	switch schemaType(s) {
	case "object":
		props, _ := s["properties"].(map[string]any)
		if len(props) == 0 {
			if ap, ok := s["additionalProperties"].(bool); ok && !ap {
				return map[string]any{}
			}
			if m, ok := sv.(map[string]any); ok && name != "" {
				return m
			}
			return fl.sem
		}
		req := stringSet(s["required"])
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := map[string]any{}
		for _, k := range keys {
			ps, _ := props[k].(map[string]any)
			if ps == nil {
				ps = map[string]any{}
			}
			if !slices.Contains(req, k) {
				if _, ok := fl.lookup(k); !ok && g.hint(k) == "" {
					continue
				}
			}
			if v := fl.fill(k, ps, depth+1); v != nil {
				out[k] = v
			}
		}
		return out
	case "array":
		items, _ := s["items"].(map[string]any)
		if items == nil {
			items = map[string]any{}
		}
		var src []string
		switch v := sv.(type) {
		case []string:
			src = v
		case string:
			src = []string{v}
		}
		lo, hi := intKw(s, "minItems", 0), intKw(s, "maxItems", -1)
		n := max(len(src), lo, 1)
		if hi >= 0 && n > hi {
			n = hi
		}
		out := make([]any, 0, n)
		for i := range n {
			if i < len(src) {
				child := filler{w: fl.w, root: fl.root, sem: itemSem(fl.sem, src[i])}
				out = append(out, child.fill("item", items, depth+1))
				continue
			}
			out = append(out, fl.fill(name, items, depth+1))
		}
		return out
	case "integer", "number":
		return g.number(name, s)
	case "boolean":
		return false
	case "null":
		return nil
	}
	// string
	var str string
	switch v := sv.(type) {
	case string:
		str = v
	case []string:
		str = strings.Join(v, "; ")
	default:
		str = g.str(name, s)
	}
	if min := intKw(s, "minLength", 0); len([]rune(str)) < min {
		for len([]rune(str)) < min {
			str += " " + fl.w.sentences(1)
		}
	}
	if maxLen := intKw(s, "maxLength", 0); maxLen > 0 {
		if r := []rune(str); len(r) > maxLen {
			str = strings.TrimSpace(string(r[:maxLen]))
		}
	}
	return str
}

// itemSem is the content for one array item (an objective): the item's
// text under every name an item schema might use, over the parent content.
func itemSem(parent map[string]any, text string) map[string]any {
	out := make(map[string]any, len(parent)+8)
	for k, v := range parent {
		out[k] = v
	}
	for _, k := range []string{"item", "text", "description", "summary", "title", "objective", "goal", "step", "task", "name", "content"} {
		out[k] = text
	}
	return out
}
