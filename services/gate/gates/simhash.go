package gates

import (
	"hash/fnv"
	"math/bits"
	"strings"
	"unicode"
)

// normalizeWords lower-cases text and splits it into words of letters and digits; punctuation,
// case and spacing do not make two texts different.
func normalizeWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	})
}

// shingle is the length, in characters, of SimHash's features.
const shingle = 5

// SimHash is a 64-bit SimHash of text over character shingles (every run of 5 characters of the
// normalised text, words joined by single spaces): texts that share most shingles get
// fingerprints a small Hamming distance apart. Character shingles, tuned on the evaluation set's
// tuning half (services/worldgate/evalset), replaced word shingles (single words and adjacent pairs):
// a short line has few words, so one changed word (a contraction, "on" for "upon") moved a
// third of the features and up to 19 bits, as far as a new line on the same subject; with
// 5-character shingles the near-duplicates of the tuning half are at most 14 bits apart and
// its true variations at least 23.
func SimHash(text string) uint64 {
	words := normalizeWords(text)
	if len(words) == 0 {
		return 0
	}
	r := []rune(" " + strings.Join(words, " ") + " ")
	var acc [64]int
	add := func(feature []rune) {
		h := fnv.New64a()
		_, _ = h.Write([]byte(string(feature)))
		x := mix(h.Sum64())
		for i := range 64 {
			if x&(1<<uint(i)) != 0 {
				acc[i]++
			} else {
				acc[i]--
			}
		}
	}
	if len(r) <= shingle {
		add(r)
	}
	for i := 0; i+shingle <= len(r); i++ {
		add(r[i : i+shingle])
	}
	var out uint64
	for i := range 64 {
		if acc[i] > 0 {
			out |= 1 << uint(i)
		}
	}
	return out
}

// mix spreads FNV's output over all 64 bits (FNV-1a's high bits vary little for short input).
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Hamming is the number of bits in which a and b differ.
func Hamming(a, b uint64) int { return bits.OnesCount64(a ^ b) }
