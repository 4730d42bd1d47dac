package graphx

import (
	"fmt"
	"sort"
)

// Props is a decoded elementMap/valueMap: keys as strings ("id", "label",
// "IN", "OUT" for the tokens), values as returned.
type Props map[string]any

// AsProps converts a map result (map[any]any or map[string]any) to Props.
func AsProps(v any) (Props, bool) {
	switch m := v.(type) {
	case map[any]any:
		p := make(Props, len(m))
		for k, val := range m {
			p[fmt.Sprint(k)] = val
		}
		return p, true
	case map[string]any:
		return Props(m), true
	}
	return nil, false
}

// unwrap returns the single value of a one-element list (valueMap style).
func unwrap(v any) any {
	if l, ok := v.([]any); ok && len(l) == 1 {
		return l[0]
	}
	return v
}

// String returns the property as a string ("" if absent).
func (p Props) String(key string) string {
	v, ok := p[key]
	if !ok || v == nil {
		return ""
	}
	v = unwrap(v)
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// Int returns a numeric property as int64 (0 if absent).
func (p Props) Int(key string) int64 {
	switch n := unwrap(p[key]).(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	case int:
		return int64(n)
	case int16:
		return int64(n)
	case int8:
		return int64(n)
	case float64:
		return int64(n)
	case float32:
		return int64(n)
	}
	return 0
}

// Bool returns a boolean property (false if absent).
func (p Props) Bool(key string) bool {
	b, _ := unwrap(p[key]).(bool)
	return b
}

// Strings returns a list property (a list value, a multi-property or a single
// string) as strings.
func (p Props) Strings(key string) []string {
	v, ok := p[key]
	if !ok || v == nil {
		return []string{}
	}
	var out []string
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case []any:
			for _, e := range t {
				walk(e)
			}
		case []string:
			out = append(out, t...)
		case map[any]bool: // gremlin-go decodes sets this way
			var keys []string
			for k := range t {
				keys = append(keys, fmt.Sprint(k))
			}
			sort.Strings(keys)
			out = append(out, keys...)
		case nil:
		default:
			out = append(out, fmt.Sprint(t))
		}
	}
	walk(v)
	if out == nil {
		out = []string{}
	}
	return out
}

// Ref returns the id of an edge endpoint in an edge elementMap ("IN" or "OUT").
func (p Props) Ref(dir string) string {
	if m, ok := AsProps(p[dir]); ok {
		return m.String("id")
	}
	return ""
}

// Known returns the property keys other than the tokens.
func (p Props) Known(skip ...string) []string {
	var keys []string
outer:
	for k := range p {
		switch k {
		case "id", "label", "IN", "OUT":
			continue
		}
		for _, s := range skip {
			if k == s {
				continue outer
			}
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
