package mcpx

import (
	"github.com/google/jsonschema-go/jsonschema"
)

// Limit bounds one input property.
type Limit struct {
	MinLength, MaxLength int      // strings (0: unset)
	Min, Max             *float64 // numbers
	Enum                 []string // strings
}

// IntRange returns a numeric limit min..max.
func IntRange(lo, hi int) Limit {
	l, h := float64(lo), float64(hi)
	return Limit{Min: &l, Max: &h}
}

// StrLen returns a string length limit.
func StrLen(lo, hi int) Limit { return Limit{MinLength: lo, MaxLength: hi} }

// InputSchema derives T's JSON schema (descriptions from `jsonschema` struct
// tags) and adds limits that the SDK enforces before the handler runs (a
// violation is a tool error the model can read) and that the model sees in
// tools/list.
func InputSchema[T any](limits map[string]Limit) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		// Types are fixed at compile time; a failure here is a programming
		// error that every test catches.
		return &jsonschema.Schema{Type: "object"}
	}
	for name, l := range limits {
		p := s.Properties[name]
		if p == nil {
			continue
		}
		if l.MinLength > 0 {
			p.MinLength = Ptr(l.MinLength)
		}
		if l.MaxLength > 0 {
			p.MaxLength = Ptr(l.MaxLength)
		}
		p.Minimum, p.Maximum = l.Min, l.Max
		for _, e := range l.Enum {
			p.Enum = append(p.Enum, e)
		}
	}
	return s
}

// Ptr returns &v.
func Ptr[T any](v T) *T { return &v }
