package classifytools

import (
	"regexp/syntax"
	"strings"
	"unicode"
)

// A prefilter is what a text must contain for a pattern to match it: at least one of its
// strings, compared case-folded (fold). A nil prefilter knows nothing, and the pattern always
// runs. Patterns are slow (each a backtracking pass over the text) and most texts contain none
// of a pattern's words, so a few substring searches decide most patterns.
type prefilter []string

// newPrefilter derives a pattern's prefilter from its syntax. Every rule is sound: any text the
// pattern matches contains one of the strings.
func newPrefilter(expr string) prefilter {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	return required(re)
}

// required returns strings one of which every match of re contains, or nil if it finds none.
func required(re *syntax.Regexp) prefilter {
	switch re.Op {
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return nil
		}
		return prefilter{fold(string(re.Rune))}
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		// Every part matches within the match: the most selective part's strings will do.
		var best prefilter
		for _, sub := range re.Sub {
			if r := required(sub); r != nil && (best == nil || r.shortest() > best.shortest()) {
				best = r
			}
		}
		return best
	case syntax.OpAlternate:
		// One branch matches: the union of the branches' strings, if every branch has some.
		var all prefilter
		for _, sub := range re.Sub {
			r := required(sub)
			if r == nil {
				return nil
			}
			all = append(all, r...)
		}
		return all
	}
	return nil
}

func (p prefilter) shortest() int {
	n := -1
	for _, s := range p {
		if n < 0 || len(s) < n {
			n = len(s)
		}
	}
	return n
}

// admits reports whether folded (a text passed through fold) may match the pattern.
func (p prefilter) admits(folded string) bool {
	if p == nil {
		return true
	}
	for _, s := range p {
		if strings.Contains(folded, s) {
			return true
		}
	}
	return false
}

// fold maps every rune to the smallest rune of its case-folding orbit (unicode.SimpleFold), so
// that two strings a case-insensitive pattern treats alike fold alike ("ſ", "S" and "s" all
// become "S").
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		return min
	}, s)
}
