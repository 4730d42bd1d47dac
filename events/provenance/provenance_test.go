package provenance_test

import (
	"encoding/json"
	"testing"

	"github.com/worldgate/worldgate/events/provenance"
)

func TestCanonical(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"b": 1, "a": [1.50, "x<y&z"], "c": {"z": null, "y": true}}`, `{"a":[1.50,"x<y&z"],"b":1,"c":{"y":true,"z":null}}`},
		{` "é" `, `"é"`},
		{`12e3`, `12e3`},
	} {
		got, err := provenance.Canonical([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{``, `{`, `1 2`} {
		if _, err := provenance.Canonical([]byte(bad)); err == nil {
			t.Errorf("Canonical(%q) accepted", bad)
		}
	}
}

func TestContextHashIsStableAcrossReencoding(t *testing.T) {
	res := []provenance.ToolResult{{Server: "world", Tool: "get-location", ArgsHash: "aa", Result: json.RawMessage(`{"name": "Square", "exits": ["north"]}`)},
		{Server: "lore", Tool: "search-lore", ArgsHash: "bb", Error: "timeout"}}
	h1, err := provenance.ContextHash("ambience", "t1", res, "m1")
	if err != nil {
		t.Fatal(err)
	}
	// The same result re-encoded (as a gate that unmarshals and marshals the proposal does).
	res2 := append([]provenance.ToolResult(nil), res...)
	res2[0].Result = json.RawMessage(`{"exits":["north"],"name":"Square"}`)
	if h2, _ := provenance.ContextHash("ambience", "t1", res2, "m1"); h2 != h1 {
		t.Fatalf("re-encoded result changed the hash: %s vs %s", h2, h1)
	}
	// Known answer: pins the definition so a change is deliberate (and the ai-worker notices).
	// It is sha256 of ["worldgate.context/v1","ambience","t1","m1",[["world","get-location","aa",
	// {"exits":["north"],"name":"Square"},""],["lore","search-lore","bb",null,"timeout"]]].
	const want = "3c90c42dc5c9cde4a43423c73cf489677e9c23ab2b5d881c52bf20cbd48ec59d"
	if h1 != want {
		t.Fatalf("context hash %s, want %s", h1, want)
	}
	for name, other := range map[string]func() (string, error){
		"purpose":  func() (string, error) { return provenance.ContextHash("quest_seed", "t1", res, "m1") },
		"template": func() (string, error) { return provenance.ContextHash("ambience", "t2", res, "m1") },
		"model":    func() (string, error) { return provenance.ContextHash("ambience", "t1", res, "m2") },
		"tool order": func() (string, error) {
			return provenance.ContextHash("ambience", "t1", []provenance.ToolResult{res[1], res[0]}, "m1")
		},
		"tool result": func() (string, error) { return provenance.ContextHash("ambience", "t1", res[:1], "m1") },
	} {
		h, err := other()
		if err != nil || h == h1 {
			t.Errorf("changing the %s did not change the hash (%v)", name, err)
		}
	}
	if _, err := provenance.ContextHash("ambience", "t1", []provenance.ToolResult{{Result: json.RawMessage(`{`)}}, "m"); err == nil {
		t.Fatal("invalid result JSON accepted")
	}
}

func TestArgsAndResultHash(t *testing.T) {
	a, _ := provenance.ArgsHash(map[string]any{"locationId": "loc:square", "depth": 2})
	b, _ := provenance.ArgsHash(map[string]any{"depth": 2, "locationId": "loc:square"})
	r, _ := provenance.ResultHash(json.RawMessage(`{"depth":2,"locationId":"loc:square"}`))
	if a != b || a != r {
		t.Fatalf("hashes differ: %s %s %s", a, b, r)
	}
}
