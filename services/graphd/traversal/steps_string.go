package traversal

import (
	"regexp"
	"strings"
	"unicode"

	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// String steps (TinkerPop 3.7): toUpper, toLower, trim, lTrim, rTrim, length,
// substring, replace, split, format. A null stays null; with Scope.local the
// step maps each string of a list.

// stringFn returns the function a string step applies to one string.
func stringFn(s *step, args []any) (func(string) any, error) {
	strArg := func(i int) (string, bool, error) {
		if i >= len(args) || args[i] == nil {
			return "", false, nil
		}
		str, ok := args[i].(string)
		if !ok {
			return "", false, evalErr("%s() takes string arguments, got %s", s.op, describe(args[i]))
		}
		return str, true, nil
	}
	switch s.op {
	case "toUpper":
		return func(x string) any { return strings.ToUpper(x) }, nil
	case "toLower":
		return func(x string) any { return strings.ToLower(x) }, nil
	case "trim":
		return func(x string) any { return strings.TrimFunc(x, unicode.IsSpace) }, nil
	case "lTrim":
		return func(x string) any { return strings.TrimLeftFunc(x, unicode.IsSpace) }, nil
	case "rTrim":
		return func(x string) any { return strings.TrimRightFunc(x, unicode.IsSpace) }, nil
	case "length":
		return func(x string) any { return int32(len([]rune(x))) }, nil
	case "substring":
		if len(args) < 1 || len(args) > 2 {
			return nil, evalErr("substring() takes a start and an optional end index")
		}
		start, ok := toInt64(args[0])
		if !ok {
			return nil, evalErr("substring() takes integer indexes")
		}
		var end int64
		hasEnd := len(args) == 2 && args[1] != nil
		if hasEnd {
			if end, ok = toInt64(args[1]); !ok {
				return nil, evalErr("substring() takes integer indexes")
			}
		}
		return func(x string) any {
			r := []rune(x)
			n := int64(len(r))
			clamp := func(i int64) int64 {
				if i < 0 {
					i += n
				}
				return min(max(i, 0), n)
			}
			b, e := clamp(start), n
			if hasEnd {
				e = clamp(end)
			}
			if b >= e {
				return ""
			}
			return string(r[b:e])
		}, nil
	case "replace":
		if len(args) != 2 {
			return nil, evalErr("replace() takes the text to replace and its replacement")
		}
		old, okOld, err := strArg(0)
		if err != nil {
			return nil, err
		}
		repl, _, err := strArg(1)
		if err != nil {
			return nil, err
		}
		return func(x string) any {
			if !okOld {
				return x
			}
			return strings.ReplaceAll(x, old, repl)
		}, nil
	case "split":
		if len(args) != 1 {
			return nil, evalErr("split() takes a separator")
		}
		sep, okSep, err := strArg(0)
		if err != nil {
			return nil, err
		}
		return func(x string) any {
			var parts []string
			switch {
			case !okSep:
				parts = strings.FieldsFunc(x, unicode.IsSpace)
			case sep == "":
				for _, r := range x {
					parts = append(parts, string(r))
				}
			default:
				parts = strings.Split(x, sep)
				for len(parts) > 0 && parts[len(parts)-1] == "" { // Java's String.split
					parts = parts[:len(parts)-1]
				}
			}
			out := make([]any, len(parts))
			for i, p := range parts {
				out[i] = p
			}
			return out
		}, nil
	}
	return nil, evalErr("step %s() is not supported by graphd", s.op)
}

func runStringStep(_ *execCtx, s *step, in []*trav) ([]*trav, error) {
	args, local := scopeLocal(s.args)
	fn, err := stringFn(s, args)
	if err != nil {
		return nil, err
	}
	out := make([]*trav, 0, len(in))
	for _, t := range in {
		switch x := t.obj.(type) {
		case nil:
			out = append(out, t.split(nil))
		case string:
			out = append(out, t.split(fn(x)))
		default:
			l, isList := asList(t.obj)
			if !local || !isList {
				if local {
					return nil, evalErr("The %s(local) step can only take string or list of strings, encountered %s", s.op, describe(t.obj))
				}
				return nil, evalErr("The %s() step can only take string as argument, encountered %s", s.op, describe(t.obj))
			}
			r := make([]any, len(l))
			for i, e := range l {
				switch y := e.(type) {
				case nil:
				case string:
					r[i] = fn(y)
				default:
					return nil, evalErr("The %s(local) step can only take string or list of strings, encountered %s", s.op, describe(e))
				}
			}
			out = append(out, t.split(r))
		}
	}
	return out, nil
}

var formatVar = regexp.MustCompile(`%\{(.*?)\}`)

// runFormat implements format(pattern): %{key} takes the element's property
// (first value), a map's entry, or a step label / side effect of that name;
// %{_} takes the next by() modulator's value (the modulators form a ring). A
// traverser for which a variable has no value is filtered.
func runFormat(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) != 1 {
		return nil, evalErr("format() takes a pattern")
	}
	pattern, ok := s.args[0].(string)
	if !ok {
		return nil, evalErr("format() takes a string pattern")
	}
	var out []*trav
	for _, t := range in {
		ring := 0
		missing := false
		var ferr error
		res := formatVar.ReplaceAllStringFunc(pattern, func(m string) string {
			if missing || ferr != nil {
				return ""
			}
			name := m[2 : len(m)-1]
			var v any
			found := false
			if name == "_" {
				if len(s.by) == 0 {
					missing = true
					return ""
				}
				r, ok, err := ec.byValue(s.by[ring%len(s.by)], t)
				ring++
				if err != nil {
					ferr = err
					return ""
				}
				v, found = r, ok
			} else {
				switch x := t.obj.(type) {
				case *graph.Vertex, *graph.Edge, *graph.VertexProperty:
					if vs := propValues(x, name); len(vs) > 0 {
						v, found = vs[0], true
					}
				case *gb.Map:
					v, found = x.Get(name)
				}
				if !found {
					v, found = ec.selectOne(t, "last", name)
				}
			}
			if !found || v == nil {
				missing = true
				return ""
			}
			if str, ok := v.(string); ok {
				return str
			}
			return gremlinString(v)
		})
		if ferr != nil {
			return nil, ferr
		}
		if !missing {
			out = append(out, t.split(res))
		}
	}
	return out, nil
}
