// Package textstats measures how varied texts are: their words and distinct-n (the share of
// word n-grams that are distinct). One definition for every component that reports it: the
// event-processor's diversity metrics over committed content, `worldgate shadow`'s comparison
// of template versions, `worldgate eval -live`. Pure functions, no I/O.
package textstats

import (
	"strings"
	"unicode"
)

// Words lower-cases text and splits it into runs of letters and digits: punctuation, case and
// spacing do not make two texts different.
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// NGrams returns the word n-grams of text, each its words joined by a space; n-grams do not
// cross texts.
func NGrams(text string, n int) []string {
	if n <= 0 {
		return nil
	}
	w := Words(text)
	var out []string
	for i := 0; i+n <= len(w); i++ {
		out = append(out, strings.Join(w[i:i+n], " "))
	}
	return out
}

// DistinctN is distinct-n over texts: the number of distinct word n-grams divided by the number
// of n-grams (1: nothing repeats). 0 when there is no n-gram.
func DistinctN(texts []string, n int) float64 {
	seen := map[string]bool{}
	total := 0
	for _, t := range texts {
		for _, g := range NGrams(t, n) {
			seen[g] = true
			total++
		}
	}
	if total == 0 {
		return 0
	}
	return float64(len(seen)) / float64(total)
}

// Variety is how little a speaker's texts repeat one another: distinct-2 over them, or distinct-1
// when they are single words (no bigrams). An NPC whose last lines have a low variety is stale.
func Variety(texts []string) float64 {
	if d2 := DistinctN(texts, 2); d2 > 0 {
		return d2
	}
	return DistinctN(texts, 1)
}
