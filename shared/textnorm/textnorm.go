// Package textnorm folds disguised text to what a reader sees, so that rules judge what is read
// and not how it is spelt: Unicode compatibility forms (fullwidth, ligatures, circled letters),
// Cyrillic and Greek letters that look Latin, zero-width and bidirectional control characters,
// leetspeak ("k1ll y0u") and spaced-out letters ("k i l l"). One definition for every component
// that judges text (mcp-classify's moderate-content, which the input rail and the safety gate
// ask; the dedup gate may fold with it too). Pure functions, no I/O; it never rewrites what is
// stored: callers keep the original for the record and judge the folded form.
package textnorm

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// What Fold found and folded, as Folded.Disguises names them.
const (
	ZeroWidth     = "zero-width"    // zero-width characters (U+200B–U+200D, U+2060, U+FEFF, soft hyphen) removed
	Bidi          = "bidi"          // bidirectional controls (U+202A–U+202E, U+2066–U+2069, LRM, RLM, ALM) removed
	Control       = "control"       // other control characters (not tab or newline) replaced by a space
	Compatibility = "compatibility" // compatibility forms (fullwidth, ligatures, styled letters) folded by NFKC
	Confusable    = "confusable"    // Cyrillic or Greek look-alikes of Latin letters folded
	Leet          = "leet"          // digits and symbols standing for letters inside words folded
	Spaced        = "spaced"        // letters spaced or dotted out ("k i l l") joined
)

// Folded is text as a reader sees it.
type Folded struct {
	// Text is the folded text, lower-cased.
	Text string
	// Disguises lists what was folded, in the order of the constants above; empty for plain text.
	Disguises []string
	// Logical is, for a text with a right-to-left override, the text folded in the order it was
	// typed (the controls only removed), where Text is read as shown: an override is used both
	// ways, to show reversed letters the right way round and as an invisible character that
	// breaks a word. Empty for a text without an override.
	Logical string
}

// Has reports whether f found that disguise.
func (f Folded) Has(disguise string) bool {
	for _, d := range f.Disguises {
		if d == disguise {
			return true
		}
	}
	return false
}

// IsZeroWidth reports whether r is an invisible formatting character that joins or hides letters.
func IsZeroWidth(r rune) bool {
	switch r {
	case '\u200b', '\u200c', '\u200d', '\u2060', '\ufeff', '\u00ad', '\u180e', '\u2061', '\u2062', '\u2063', '\u2064':
		return true
	}
	return false
}

// IsBidi reports whether r is a bidirectional control character (they can reorder what is shown).
func IsBidi(r rune) bool {
	return (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') || r == '\u200e' || r == '\u200f' || r == '\u061c'
}

// IsControl reports whether r is a control character other than tab, newline and carriage return.
func IsControl(r rune) bool {
	return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r'
}

// The bidirectional controls that open and close an override.
const (
	rlo = '\u202e' // right-to-left override: what follows is shown right to left
	lro = '\u202d' // left-to-right override
	pdf = '\u202c' // pop directional formatting: closes the override
)

// unoverride reverses each run under a right-to-left override (up to its pop, the next override,
// a line break or the end), as a reader sees it: "\u202eyadot uoy llik" reads "kill you today".
// A run with right-to-left letters (Hebrew, Arabic) is already shown that way and is kept; a
// combining mark stays after its letter. The controls themselves are removed later.
func unoverride(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	var run []rune
	in := false
	flush := func() {
		if in && !hasRTL(run) {
			reverseClusters(run)
		}
		b.WriteString(string(run))
		run = run[:0]
	}
	for _, r := range s {
		switch {
		case r == rlo:
			flush()
			in = true
			b.WriteRune(r)
		case in && (r == pdf || r == lro || r == '\n' || r == '\u2029'):
			flush()
			in = false
			b.WriteRune(r)
		case in:
			run = append(run, r)
		default:
			b.WriteRune(r)
		}
	}
	flush()
	return b.String()
}

func hasRTL(rs []rune) bool {
	for _, r := range rs {
		if unicode.In(r, unicode.Hebrew, unicode.Arabic, unicode.Syriac, unicode.Thaana, unicode.Nko) {
			return true
		}
	}
	return false
}

// reverseClusters reverses rs in place, keeping each combining mark after the letter it follows.
func reverseClusters(rs []rune) {
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	// Marks now come before their letter: move each run of marks back behind it.
	for i := 0; i < len(rs); i++ {
		if !unicode.Is(unicode.Mn, rs[i]) {
			continue
		}
		j := i
		for j < len(rs) && unicode.Is(unicode.Mn, rs[j]) {
			j++
		}
		if j < len(rs) {
			// rs[i:j] are marks, rs[j] their letter: letter first, marks reversed back.
			base := rs[j]
			marks := append([]rune(nil), rs[i:j]...)
			rs[i] = base
			for k := range marks {
				rs[i+1+k] = marks[len(marks)-1-k]
			}
		}
		i = j
	}
}

// confusables are the Cyrillic and Greek letters that render like a Latin letter (a hand-picked
// subset of Unicode's confusables.txt, lower case: TR39's skeletons also fold Latin letters
// into each other, "m" into "rn", which would break words instead of revealing them).
var confusables = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'b', 'е': 'e', 'ё': 'e', 'һ': 'h', 'і': 'i', 'ї': 'i', 'ј': 'j', 'к': 'k', 'м': 'm', 'н': 'h',
	'о': 'o', 'р': 'p', 'с': 'c', 'т': 't', 'у': 'y', 'х': 'x', 'ѕ': 's', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w',
	'ӏ': 'l',
	// Armenian
	'ո': 'n', 'ս': 'u', 'օ': 'o', 'հ': 'h', 'ց': 'g', 'ք': 'f', 'զ': 'q',
	// Greek
	'α': 'a', 'β': 'b', 'ε': 'e', 'η': 'n', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'τ': 't', 'υ': 'u',
	'χ': 'x', 'γ': 'y', 'ω': 'w',
}

// latinLookalikes are Latin-script letters that are not ASCII but read as one: small capitals
// and IPA letters ("ɪ ᴡɪʟʟ ᴋɪʟʟ ʏᴏᴜ"), and the dotless i. NFKC leaves them as they are; no
// language writes its words in them, so they are folded wherever they stand, even alone.
var latinLookalikes = map[rune]rune{
	'ᴀ': 'a', 'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e', 'ꜰ': 'f', 'ɢ': 'g', 'ʜ': 'h', 'ɪ': 'i', 'ᴊ': 'j',
	'ᴋ': 'k', 'ʟ': 'l', 'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p', 'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't', 'ᴜ': 'u',
	'ᴠ': 'v', 'ᴡ': 'w', 'ʏ': 'y', 'ᴢ': 'z', 'ɑ': 'a', 'ɡ': 'g', 'ı': 'i', 'ɩ': 'i', 'ȷ': 'j', 'ʋ': 'v',
}

// leet are the digits and symbols read as letters inside a word that also has letters.
var leet = map[rune]rune{'0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '@': 'a', '$': 's', '!': 'i', '|': 'l', '€': 'e'}

// Fold returns text as a reader sees it (see the package comment).
func Fold(text string) Folded {
	if !strings.ContainsRune(text, rlo) {
		return fold(text, false)
	}
	f := fold(text, true)
	if l := fold(text, false); l.Text != f.Text {
		f.Logical = l.Text
	}
	return f
}

// fold folds text, reading what a right-to-left override covers reversed when shown is set.
func fold(text string, shown bool) Folded {
	var f Folded
	found := map[string]bool{}
	// 1. Text under a right-to-left override is shown reversed: read it as shown. Then
	// invisible and control characters.
	if shown {
		text = unoverride(text)
	}
	var b strings.Builder
	b.Grow(len(text))
	for _, r := range text {
		switch {
		case IsZeroWidth(r):
			found[ZeroWidth] = true
		case IsBidi(r):
			found[Bidi] = true
		case IsControl(r):
			found[Control] = true
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	s := b.String()
	// 2. Compatibility forms (NFKC), told apart from mere composition (NFC).
	if !isASCII(s) {
		k := norm.NFKC.String(s)
		if k != norm.NFC.String(s) {
			found[Compatibility] = true
		}
		s = k
	}
	s = strings.ToLower(s)
	// 3. Spaced-out letters, then leetspeak.
	if j, ok := joinSpaced(s); ok {
		s, found[Spaced] = j, true
	}
	s = foldWords(s, func(w string) (string, bool) { return foldLeet(w) })
	if j, ok := foldLoneOne(s); ok {
		s, found[Leet] = j, true
	}
	if strings.Contains(s, "\x00") {
		s = strings.ReplaceAll(s, "\x00", "")
		found[Leet] = true
		if !isASCII(s) {
			s = norm.NFC.String(s) // a folded digit may now compose with a combining mark after it
		}
	}
	// 4. Look-alike letters, in words that are Latin or (in a text with no other Cyrillic or
	// Greek letters) made only of look-alikes.
	if !isASCII(s) {
		native := hasNative(s)
		s = foldWords(s, func(w string) (string, bool) { return foldConfusables(w, native) })
		if strings.Contains(s, "\x00") {
			s = strings.ReplaceAll(s, "\x00", "")
			found[Confusable] = true
		}
	}
	f.Text = s
	for _, d := range []string{ZeroWidth, Bidi, Control, Compatibility, Confusable, Leet, Spaced} {
		if found[d] {
			f.Disguises = append(f.Disguises, d)
		}
	}
	return f
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldWords applies fold to each run of non-space characters; a word fold changed is marked
// with a trailing NUL, which Fold counts and removes.
func foldWords(s string, fold func(string) (string, bool)) string {
	var b strings.Builder
	b.Grow(len(s))
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		if w, changed := fold(s[start:end]); changed {
			b.WriteString(w)
			b.WriteByte(0)
		} else {
			b.WriteString(s[start:end])
		}
		start = -1
	}
	for i, r := range s {
		if unicode.IsSpace(r) {
			flush(i)
			b.WriteRune(r)
		} else if start < 0 {
			start = i
		}
	}
	flush(len(s))
	return b.String()
}

// hasNative reports a Cyrillic, Greek or Armenian letter that looks like no Latin one: the text is
// written in that script, not disguised with it.
func hasNative(s string) bool {
	for _, r := range s {
		if unicode.In(r, unicode.Cyrillic, unicode.Greek, unicode.Armenian) && confusables[r] == 0 {
			return true
		}
	}
	return false
}

// foldConfusables folds look-alikes in a word that has Latin letters or, where the text is not
// native Cyrillic or Greek, consists only of look-alikes (a Russian or Greek text keeps its letters).
func foldConfusables(w string, native bool) (string, bool) {
	latin, other, look := 0, 0, 0
	for _, r := range w {
		switch {
		case latinLookalikes[r] != 0:
			latin++
			look++
		case confusables[r] != 0:
			look++
		case r < utf8.RuneSelf && unicode.IsLetter(r):
			latin++
		case unicode.IsLetter(r):
			other++
		}
	}
	if look == 0 || other > 0 || (latin == 0 && (native || look < 2)) {
		return w, false
	}
	var b strings.Builder
	for _, r := range w {
		if c := confusables[r]; c != 0 {
			r = c
		} else if c := latinLookalikes[r]; c != 0 {
			r = c
		}
		b.WriteRune(r)
	}
	return b.String(), true
}

// foldLeet reads digits and symbols as letters in a word that has at least one letter and one
// leet character between letters or digits: "k1ll", "y0urs3lf", "4r3"; plain numbers ("42"),
// ordinals ("3rd"), and punctuation at a word's edges ("help!") are left alone.
func foldLeet(w string) (string, bool) {
	if !strings.ContainsAny(w, "013457@$!|€") {
		return w, false
	}
	letters, leets := 0, 0
	rs := []rune(w)
	// Punctuation at the edges is not part of the word.
	lo, hi := 0, len(rs)
	for lo < hi && !unicode.IsLetter(rs[lo]) && !unicode.IsDigit(rs[lo]) && rs[lo] != '@' && rs[lo] != '$' {
		lo++
	}
	for hi > lo && !unicode.IsLetter(rs[hi-1]) && !unicode.IsDigit(rs[hi-1]) {
		hi--
	}
	for _, r := range rs[lo:hi] {
		if unicode.IsLetter(r) {
			letters++
		} else if leet[r] != 0 {
			leets++
		}
	}
	if letters == 0 || leets == 0 || isOrdinal(string(rs[lo:hi])) {
		return w, false
	}
	for i := lo; i < hi; i++ {
		if c := leet[rs[i]]; c != 0 {
			rs[i] = c
		}
	}
	return string(rs), true
}

// afterI are words that follow the pronoun "I" and never the number one ("1 will", "1 think"),
// and clauseStart the words a clause with "I" as its subject may start after.
var (
	afterI = map[string]bool{
		"am": true, "will": true, "would": true, "wont": true, "won't": true, "have": true, "had": true,
		"think": true, "know": true, "want": true, "wanna": true, "gonna": true, "hope": true, "swear": true,
		"promise": true, "should": true, "shall": true, "must": true, "need": true, "just": true,
		"really": true, "never": true, "don't": true, "dont": true, "didn't": true, "didnt": true,
		"can't": true, "cant": true, "wish": true, "hate": true, "love": true, "feel": true, "guess": true,
		"bet": true, "mean": true, "told": true, "said": true, "saw": true,
	}
	clauseStart = map[string]bool{"and": true, "but": true, "so": true, "then": true, "because": true,
		"cause": true, "cuz": true, "coz": true, "cos": true, "if": true, "when": true, "that": true, "until": true}
)

// foldLoneOne reads a lone "1" as "I" where it starts a clause (the text's start, after
// sentence punctuation or a conjunction) and the next word is one that follows "I" and never a
// number: "1 will find you", "and 1 think". "1 apple", "room 1 is free" and "1 can of oil" keep it.
func foldLoneOne(s string) (string, bool) {
	if !strings.Contains(s, "1 ") {
		return s, false
	}
	words := strings.Split(s, " ")
	changed := false
	for i := 0; i+1 < len(words); i++ {
		if words[i] != "1" || !afterI[strings.TrimRight(strings.TrimSuffix(words[i+1], "\x00"), ".,!?;:")] {
			continue
		}
		if i > 0 {
			prev := strings.TrimSuffix(words[i-1], "\x00")
			if prev != "" && !strings.ContainsAny(prev[len(prev)-1:], ".!?;:,") && !clauseStart[prev] {
				continue
			}
		}
		words[i] = "i\x00"
		changed = true
	}
	if !changed {
		return s, false
	}
	return strings.Join(words, " "), true
}

// isOrdinal reports numbers with an ordinal or unit suffix: 1st, 3rd, 10th, 5kg, 20m, 2x.
func isOrdinal(w string) bool {
	i := 0
	for i < len(w) && w[i] >= '0' && w[i] <= '9' {
		i++
	}
	if i == 0 {
		return false
	}
	for _, r := range w[i:] {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return len(w)-i <= 3
}

// joinSpaced joins runs of at least three single letters (or leet characters) separated by one
// separator each (a space, dot, hyphen, underscore, asterisk, slash, tilde, plus or middle dot):
// "k i l l", "k.i.l.l", "m-u-r-d-e-r", "k*i*l*l". Two spaces or any other character end a run,
// so "k i l l  y o u" reads "kill you"; in a run whose letters are joined by another separator, a
// space is a word break: "y*o*u*r s*e*l*f" and "d.i.c.h u.m" read "your self" and "dich um".
func joinSpaced(s string) (string, bool) {
	if !mayBeSpaced(s) {
		return s, false
	}
	rs := []rune(s)
	single := func(i int) bool {
		r := rs[i]
		if !unicode.IsLetter(r) && leet[r] == 0 {
			return false
		}
		before := i == 0 || !isWordRune(rs[i-1])
		after := i == len(rs)-1 || !isWordRune(rs[i+1])
		return before && after
	}
	var out []rune
	changed := false
	for i := 0; i < len(rs); {
		if !single(i) {
			out = append(out, rs[i])
			i++
			continue
		}
		j, n, other := i, 1, false
		for j+2 < len(rs) && isSpacer(rs[j+1]) && single(j+2) {
			other = other || rs[j+1] != ' '
			j += 2
			n++
		}
		if n >= 3 {
			for k := i; k <= j; k += 2 {
				if k > i && other && rs[k-1] == ' ' {
					out = append(out, ' ')
				}
				out = append(out, rs[k])
			}
			changed = true
		} else {
			out = append(out, rs[i:j+1]...)
		}
		i = j + 1
	}
	if !changed {
		return s, false
	}
	return string(out), true
}

// isSpacer reports the characters that may stand between spaced-out letters.
func isSpacer(r rune) bool {
	switch r {
	case ' ', '.', '-', '_', '*', '/', '~', '+', '·', '•':
		return true
	}
	return false
}

// mayBeSpaced is joinSpaced's quick test: some character stands alone between separators twice
// in a row ("x y z" has " y ").
func mayBeSpaced(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if !isSpacer(r) || i >= len(s) {
			continue
		}
		// one character (a rune of any width) after a separator, then a separator or the end
		c, n := utf8.DecodeRuneInString(s[i:])
		if c == ' ' {
			continue
		}
		if j := i + n; j == len(s) {
			return true
		} else if next, _ := utf8.DecodeRuneInString(s[j:]); isSpacer(next) {
			return true
		}
	}
	return false
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\''
}
