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

// SimHash is a 64-bit SimHash of text over word shingles (pairs of adjacent words, and single
// words so that short texts still have features): texts that share most shingles get
// fingerprints a small Hamming distance apart.
func SimHash(text string) uint64 {
	words := normalizeWords(text)
	if len(words) == 0 {
		return 0
	}
	var acc [64]int
	add := func(feature string) {
		h := fnv.New64a()
		_, _ = h.Write([]byte(feature))
		x := mix(h.Sum64())
		for i := range 64 {
			if x&(1<<uint(i)) != 0 {
				acc[i]++
			} else {
				acc[i]--
			}
		}
	}
	for i, w := range words {
		add(w)
		if i > 0 {
			add(words[i-1] + " " + w)
		}
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
