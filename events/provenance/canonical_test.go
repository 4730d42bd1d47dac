package provenance

import (
	"bytes"
	"encoding/json"
	"testing"
)

// canonicalCases are documents the one-pass canonicaliser must encode exactly as the
// reference does: key order, duplicate keys, escapes the reference rewrites (HTML escapes,
// \u escapes of plain characters, \/), characters it escapes (U+2028, U+2029, control
// characters), invalid UTF-8, numbers as written, whitespace, nesting, and a skipped key.
var canonicalCases = []string{
	`{"b": 1, "a": [1.50, "x<y&z"], "c": {"z": null, "y": true}}`,
	`{"a":1,"a":2,"b":{"k":[],"k":{}}}`,
	`{"x":"\u003cb\u003e \u0026 \"quoted\" \/ \\ \t\n\r\b\f \u0001 \u007f"}`,
	"{\"line\":\"a\u2028b\u2029c\",\"dash\":\"\u2014 \u2019 \u20ac\"}",
	`{"e":"\u2028\u2029","s":"\ud83d\ude00 \ud800 lone","é":"é"}`,
	"{\"bad\":\"\xff\xfe ok\",\"\xc3\":1}",
	`[-0, 0.5e-7, 1E+400, 12e3, -12.000, 0]`,
	" \t\n{ \"z\" : [ 1 , { } , [ ] , \"\" ] , \"y\" : false } \r\n",
	`{"B":1,"a":2,"_":3,"":4,"aa":5,"a\u0000":6}`,
	`"just a string"`,
	`null`,
	`{"route":{"trail":[1]},"kind":"x","nested":{"route":1}}`,
	`[[[[[[[[[[{"deep":[[[[[[[[[[1]]]]]]]]]]}]]]]]]]]]]`,
}

func TestCanonicalizeAgreesWithReference(t *testing.T) {
	for _, in := range canonicalCases {
		for _, skip := range []string{"", "route"} {
			checkAgainstReference(t, []byte(in), skip)
		}
	}
	// Not JSON, or more than one value: the one-pass form declines, and Canonical gives the
	// reference's error.
	for _, bad := range []string{``, `{`, `1 2`, `{"a":1,}`, `[1,]`, `01`, `1.`, `-`, `tru`, `"\x"`, `"a`, "\"a\x01\"", `{"a" 1}`, `{} ]`} {
		if _, ok := canonicalize([]byte(bad), ""); ok {
			t.Errorf("canonicalize(%q) accepted it", bad)
		}
		_, err := Canonical([]byte(bad))
		_, rerr := reference([]byte(bad), "")
		if (err == nil) != (rerr == nil) {
			t.Errorf("Canonical(%q): error %v, the reference's %v", bad, err, rerr)
		}
	}
}

// checkAgainstReference fails when the one-pass form accepts in and encodes it otherwise than
// the reference, or accepts what the reference refuses.
func checkAgainstReference(t *testing.T, in []byte, skip string) {
	t.Helper()
	got, ok := canonicalize(in, skip)
	want, err := reference(in, skip)
	if !ok {
		return // the reference answers
	}
	if err != nil {
		t.Fatalf("canonicalize(%q, %q) accepted what the reference refuses (%v): %s", in, skip, err, got)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("canonicalize(%q, %q)\n got %s\nwant %s", in, skip, got, want)
	}
}

func FuzzCanonicalAgreesWithReference(f *testing.F) {
	for _, c := range canonicalCases {
		f.Add([]byte(c), false)
		f.Add([]byte(c), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, skipRoute bool) {
		skip := ""
		if skipRoute {
			skip = "route"
		}
		checkAgainstReference(t, in, skip)
		// Whatever the fuzzer made, a value re-marshalled by Go is always handled in one pass.
		var v any
		if json.Unmarshal(in, &v) == nil {
			raw, _ := json.Marshal(v)
			if _, ok := canonicalize(raw, ""); !ok {
				t.Fatalf("canonicalize declined Go's own encoding %s", raw)
			}
		}
	})
}

// BenchmarkCanonical compares the one-pass encoding with the reference on a tool result of
// the size the world server returns (a location with exits, NPCs and a description).
func BenchmarkCanonical(b *testing.B) {
	doc := []byte(`{"locationId":"loc:market-square","name":"Market Square","description":"Stalls of dyed cloth and copper pans crowd the square; a fountain of three herons stands in the middle — \"the herons\", they say.","exits":[{"direction":"north","to":"loc:ash-gate"},{"direction":"east","to":"loc:tannery-row"},{"direction":"south","to":"loc:river-stair"}],"npcs":["npc:brannoc","npc:ilse"],"weather":{"kind":"rain","intensity":0.4,"since":"2026-11-23T10:00:00Z"},"tags":["market","crowded","day"]}`)
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			if _, ok := canonicalize(doc, ""); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("reference", func(b *testing.B) {
		for b.Loop() {
			if _, err := reference(doc, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}
