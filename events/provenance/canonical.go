package provenance

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"
)

// canonicalize is Canonical's one-pass form: it re-encodes raw's single JSON value straight
// from its bytes, without building maps of interfaces. Its output is byte for byte the
// reference's (decode with UseNumber, then encode with HTML escaping off, reference below):
// FuzzCanonicalAgreesWithReference checks it. skip, when not "", is a key left out of the top
// level object. ok is false when the input is not something it handles the reference's way
// (invalid JSON, more than one value, nesting deeper than maxDepth, a top level that is not an
// object while skip is set): the caller then asks the reference, which gives the same answer
// or the same error.
func canonicalize(raw []byte, skip string) (out []byte, ok bool) {
	c := canon{in: raw, out: make([]byte, 0, len(raw))}
	c.space()
	if skip != "" && (c.pos >= len(raw) || raw[c.pos] != '{') {
		return nil, false
	}
	c.skip = skip
	if !c.value(0) {
		return nil, false
	}
	c.space()
	if c.pos != len(raw) {
		return nil, false
	}
	return c.out, true
}

// maxDepth bounds the nesting canonicalize follows itself; deeper documents go to the
// reference (encoding/json stops at 10,000).
const maxDepth = 500

type canon struct {
	in   []byte
	pos  int
	out  []byte
	skip string // a key to leave out of the top-level object
	mem  []member
}

// member is one object member as canonicalize wrote it to out: its key decoded (to sort on)
// and the bytes of `"key":value` in out.
type member struct {
	key        string
	start, end int
}

func (c *canon) space() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canon) value(depth int) bool {
	if depth > maxDepth || c.pos >= len(c.in) {
		return false
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(depth)
	case b == '[':
		return c.array(depth)
	case b == '"':
		_, ok := c.str()
		return ok
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(c.in[c.pos:], []byte(lit)) {
				c.out = append(c.out, lit...)
				c.pos += len(lit)
				return true
			}
		}
		return false
	}
}

func (c *canon) array(depth int) bool {
	c.pos++ // [
	c.out = append(c.out, '[')
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return true
	}
	for {
		c.space()
		if !c.value(depth + 1) {
			return false
		}
		c.space()
		if c.pos >= len(c.in) {
			return false
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return true
		default:
			return false
		}
	}
}

// object writes the members as they come, then rewrites them in key order. A key given twice
// keeps its last value, as decoding into a map does.
func (c *canon) object(depth int) bool {
	c.pos++ // {
	start := len(c.out)
	base := len(c.mem)
	skip := c.skip
	c.skip = "" // only the top level
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '{', '}')
		return true
	}
	for {
		c.space()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return false
		}
		mstart := len(c.out)
		key, ok := c.str()
		if !ok {
			return false
		}
		c.space()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return false
		}
		c.pos++
		c.out = append(c.out, ':')
		c.space()
		if !c.value(depth + 1) {
			return false
		}
		if skip != "" && key == skip {
			c.out = c.out[:mstart]
		} else {
			c.mem = append(c.mem, member{key: key, start: mstart, end: len(c.out)})
		}
		c.space()
		if c.pos >= len(c.in) {
			return false
		}
		if c.in[c.pos] == ',' {
			c.pos++
			continue
		}
		if c.in[c.pos] != '}' {
			return false
		}
		c.pos++
		break
	}
	ms := c.mem[base:]
	slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	body := c.out[start:]
	sorted := make([]byte, 0, len(body)+len(ms)+1)
	sorted = append(sorted, '{')
	for i, m := range ms {
		if i+1 < len(ms) && ms[i+1].key == m.key {
			continue // a later value for the same key wins
		}
		if len(sorted) > 1 {
			sorted = append(sorted, ',')
		}
		sorted = append(sorted, c.out[m.start:m.end]...)
	}
	sorted = append(sorted, '}')
	c.out = append(c.out[:start], sorted...)
	c.mem = c.mem[:base]
	return true
}

// str writes the string at pos in canonical form and returns it decoded. A string of plain
// characters is copied; one with escapes, or with characters the encoding escapes or replaces,
// is decoded and re-encoded by encoding/json.
func (c *canon) str() (string, bool) {
	start := c.pos
	i := start + 1
	plain := true
	for ; i < len(c.in); i++ {
		b := c.in[i]
		if b == '"' {
			break
		}
		switch {
		case b == '\\':
			plain = false
			i++ // an escaped quote does not end the string
		case b < 0x20:
			plain = false
		case b == 0xE2 && i+2 < len(c.in) && c.in[i+1] == 0x80 && (c.in[i+2] == 0xA8 || c.in[i+2] == 0xA9):
			plain = false // U+2028 and U+2029 are escaped
		}
	}
	if i >= len(c.in) {
		return "", false
	}
	raw := c.in[start : i+1]
	c.pos = i + 1
	if plain && utf8.Valid(raw) {
		c.out = append(c.out, raw...)
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return "", false
	}
	c.out = append(c.out, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
	return s, true
}

// number copies a number as written, after checking JSON's grammar for it.
func (c *canon) number() bool {
	in, i := c.in, c.pos
	digits := func() int {
		n := 0
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(in) && in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(in) && in[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	c.out = append(c.out, in[c.pos:i]...)
	c.pos = i
	return true
}

// reference is the canonical encoding by definition: decode with numbers as written, encode
// with sorted keys and HTML escaping off. skip is deleted from the top-level object.
func reference(raw []byte, skip string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if skip != "" {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		delete(m, skip)
		v = m
	} else if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one value")
	}
	return encode(v)
}
