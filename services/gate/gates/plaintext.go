package gates

import (
	"fmt"
	"regexp"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/textnorm"
)

// Committed text is plain text by contract: it reaches players' screens and templates as it is,
// and no gate rewrites it. No kind's schema allows formatting today; a kind that ever does names
// it here. The schema gate refuses what is about the text's form (formatHits: invisible and
// control characters, markdown images and links); the safety gate refuses those, URLs, and
// markup and template code (markupHits), also when disguised as compatibility forms
// ("＜script＞"). URLs are the safety gate's alone: a URL inside a script tag is markup, and the
// safety gate's refusal names it as such.

// formatPatterns are the forms of formatting refused in content text.
var formatPatterns = []struct {
	name string
	re   *regexp.Regexp
}{
	{"a markdown image", regexp.MustCompile(`!\[[^\]\n]*\]\(`)},
	{"a markdown link", regexp.MustCompile(`\[[^\]\n]+\]\(\s*[^)\s]+[^)]*\)|\[[^\]\n]+\]\[[^\]\n]*\]|<(https?|mailto|ftp):[^>\s]+>`)},
}

// urlPattern finds URLs: refused by the safety gate.
var urlPattern = regexp.MustCompile(`(?i)\b(https?|ftp|file)://\S|\bwww\.[a-z0-9-]+\.[a-z]{2,}\b|\bmailto:\S`)

// formatHits names the formatting text carries: invisible, bidirectional and control characters
// (they hide or reorder what is shown), markdown images and links. Tab and newline are text.
func formatHits(text string) []string {
	var out []string
	zw, bidi, ctl := false, false, false
	for _, r := range text {
		zw = zw || textnorm.IsZeroWidth(r)
		bidi = bidi || textnorm.IsBidi(r)
		ctl = ctl || textnorm.IsControl(r)
	}
	if zw {
		out = append(out, "a zero-width character")
	}
	if bidi {
		out = append(out, "a bidirectional control character")
	}
	if ctl {
		out = append(out, "a control character")
	}
	folded := textnorm.Fold(text).Text
	for _, p := range formatPatterns {
		if p.re.MatchString(text) || p.re.MatchString(folded) {
			out = append(out, p.name)
		}
	}
	return out
}

// plainTextProblems is the schema gate's rule on a payload's text (events.Payload.Content).
func plainTextProblems(p events.Payload, path string) []events.Problem {
	hits := formatHits(p.Content())
	if len(hits) == 0 {
		return nil
	}
	return []events.Problem{{Code: events.ProblemInvalidField, Path: path,
		Message: fmt.Sprintf("carries %s: committed text is plain text; write it without formatting, links or hidden characters", listOf(hits))}}
}

// unsafeMarkup names what the safety gate refuses in content text: formatHits, URLs, and markup
// or template code in the text as written or as a reader sees it (compatibility forms folded).
func unsafeMarkup(text string) []string {
	f := textnorm.Fold(text)
	hits := markupHits(text)
	if len(hits) == 0 && (f.Has(textnorm.Compatibility) || f.Has(textnorm.Confusable) || f.Has(textnorm.ZeroWidth) || f.Has(textnorm.Bidi)) {
		hits = markupHits(f.Text)
	}
	hits = append(hits, formatHits(text)...)
	if urlPattern.MatchString(text) || urlPattern.MatchString(f.Text) {
		hits = append(hits, "a URL")
	}
	return hits
}
