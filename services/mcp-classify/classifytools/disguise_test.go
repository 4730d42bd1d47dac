package classifytools_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
)

// TestModerateSeesThroughDisguise: the rules judge the text as a reader sees it (textnorm.Fold),
// and the verdict says how it was disguised; plain and benign disguised lines stay unflagged.
func TestModerateSeesThroughDisguise(t *testing.T) {
	p, err := classifytools.DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text, category, disguise string
	}{
		{"k1ll y0urs3lf", "self_harm", "leet"},
		{"k i l l  y o u r s e l f", "self_harm", "spaced"},
		{"ｋｉｌｌ ｙｏｕｒｓｅｌｆ", "self_harm", "compatibility"},
		{"kіll уоurѕеlf", "self_harm", "confusable"},
		{"go kill\u200b yourself", "self_harm", "zero-width"},
		{"\u202ekill yourself\u202c", "self_harm", "bidi"},
		{"＜script＞alert(1)＜/script＞", "markup_injection", "compatibility"},
		{"Th3 g473 0p3n5 47 n00n.", "", "leet"},
		{"Ｗｅｌｃｏｍｅ to the market!", "", "compatibility"},
		{"The ale is 3 coppers; the 2nd room is free.", "", ""},
	} {
		v, err := p.Moderate(context.Background(), c.text)
		if err != nil {
			t.Fatal(err)
		}
		if c.category == "" && v.Flagged || c.category != "" && !slices.Contains(v.Categories, c.category) {
			t.Errorf("%q: flagged %v %v (folded %q), want %q", c.text, v.Flagged, v.Categories, v.Folded, c.category)
		}
		if got := strings.Join(v.Disguises, ","); !strings.Contains(got, c.disguise) || (c.disguise == "" && got != "") {
			t.Errorf("%q: disguises %q, want %q", c.text, got, c.disguise)
		}
	}
}
