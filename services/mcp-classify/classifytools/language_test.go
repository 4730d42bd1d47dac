package classifytools_test

import (
	"strings"
	"testing"

	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
)

// Each verdict records a guess at the text's language; the outside set's tuning half is the bar.
func TestVerdictRecordsLanguage(t *testing.T) {
	p, err := classifytools.DefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	lines := loadOutside(t, "tune.tsv")
	right := 0
	for _, l := range lines {
		v, err := p.Moderate(t.Context(), l.text)
		if err != nil {
			t.Fatal(err)
		}
		if v.Language == l.lang {
			right++
		} else {
			t.Logf("%s guessed %s: %q", l.lang, v.Language, l.text)
		}
	}
	if float64(right) < 0.9*float64(len(lines)) {
		t.Errorf("language guessed right for %d of %d lines, want at least 90%%", right, len(lines))
	}
	if v, _ := p.Moderate(t.Context(), "12345"); v.Language != classifytools.LanguageUnknown {
		t.Errorf("a number: language %q, want %q", v.Language, classifytools.LanguageUnknown)
	}
}

// A pattern names the language it is written in; a language the guesser cannot tell is refused.
func TestPolicyPatternLanguage(t *testing.T) {
	doc := `{"version":"t","categories":[{"name":"threat","patterns":[{"re":"je vais te tuer","weight":1,"lang":"%s"}]}]}`
	if _, err := classifytools.ParsePolicy([]byte(strings.Replace(doc, "%s", "xx", 1))); err == nil || !strings.Contains(err.Error(), `language "xx"`) {
		t.Errorf("a pattern in language xx: %v", err)
	}
	p, err := classifytools.ParsePolicy([]byte(strings.Replace(doc, "%s", "fr", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := p.Moderate(t.Context(), "Je vais te tuer."); !v.Flagged || v.Language != "fr" {
		t.Errorf("French threat: %+v", v)
	}
}
