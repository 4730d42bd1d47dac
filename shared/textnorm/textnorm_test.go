package textnorm_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/worldgate/worldgate/shared/textnorm"
)

func TestFold(t *testing.T) {
	for _, c := range []struct {
		in, want  string
		disguises string
	}{
		{"Welcome to the Gilded Tankard, traveller.", "welcome to the gilded tankard, traveller.", ""},
		{"Apples are 2 coppers, 5 for a silver; the 3rd stall, 10kg sacks.", "apples are 2 coppers, 5 for a silver; the 3rd stall, 10kg sacks.", ""},
		{"Help! Over here!", "help! over here!", ""},
		{"Ｉ　ｗｉｌｌ　ｋｉｌｌ　ｙｏｕ", "i will kill you", "compatibility"},
		{"＜script＞", "<script>", "compatibility"},
		{"kіll уоurѕеlf", "kill yourself", "confusable"},             // Cyrillic і, у, о, ѕ, е
		{"Привет, как дела?", "привет, как дела?", ""},               // Russian stays Russian
		{"ki\u200bll your\u200dself", "kill yourself", "zero-width"}, // zero-width space and joiner
		{"you \u2067roof\u2069", "you roof", "bidi"},                 // an isolate only reorders: removed
		{"k1ll y0urs3lf", "kill yourself", "leet"},
		{"g0 k!ll ur53lf", "go kill urself", "leet"},
		{"k i l l  y o u r s e l f", "kill  yourself", "spaced"},
		{"I will m.u.r.d.e.r you", "i will murder you", "spaced"},
		{"a\x07b", "a b", "control"},
		{"Café crème", "café crème", ""},
		{"Cafe\u0301", "café", ""}, // composition alone is not a disguise
		// A lone "1" is "I" where it starts a clause and a word that follows "I" comes next.
		{"1 will burn your house down.", "i will burn your house down.", "leet"},
		{"1 w1ll k1ll y0u", "i will kill you", "leet"},
		{"You again? 1 swear, and 1 think you know it.", "you again? i swear, and i think you know it.", "leet"},
		// Numbers stay numbers.
		{"1 apple and 2 pears, please.", "1 apple and 2 pears, please.", ""},
		{"Room 1 is free, 1 can of oil costs 3 coppers.", "room 1 is free, 1 can of oil costs 3 coppers.", ""},
		{"Only 1 will do, the other 1 was cracked.", "only 1 will do, the other 1 was cracked.", ""},
		{"Chapter 1", "chapter 1", ""},
		// A right-to-left override shows Latin text reversed: it is read as shown.
		{"\u202eyadot uoy llik lliw I", "i will kill you today", "bidi"},
		{"I will \u202ellik\u202c you and your \u202eylimaf\u202c.", "i will kill you and your family.", "bidi"},
		{"\u202eabc\ndef", "cba\ndef", "bidi"}, // a line break ends the override
		{"\u202ee\u0301a", "a\u00e9", "bidi"},  // a mark stays after its letter
		{"\u202eשלום\u202c", "שלום", "bidi"},   // Hebrew is shown right to left anyway
		// Letters split by other separators; a space between such words is a word break.
		{"Just k*i*l*l y*o*u*r*s*e*l*f already.", "just kill yourself already.", "spaced"},
		{"I will h/u/n/t you d/o/w/n and s~t~a~b you.", "i will hunt you down and stab you.", "spaced"},
		{"Bring d.i.c.h u.m, du Versager.", "bring dich um, du versager.", "spaced"},
		{"G*G, w*e*l*l p*l*a*y*e*d!", "g*g, well played!", "spaced"},
		{"and/or 1/2 a+b", "and/or 1/2 a+b", ""},
		// Small capitals, IPA letters, the dotless i and Armenian look-alikes.
		{"\u026a \u1d21\u026a\u029f\u029f \u1d0b\u026a\u029f\u029f \u028f\u1d0f\u1d1c", "i will kill you", "confusable"},
		{"Go k\u0131ll yourself", "go kill yourself", "confusable"},
		{"I will find y\u0585ur h\u0585me", "i will find your home", "confusable"},
		{"Բարեւ, ինչպես ես", "բարեւ, ինչպես ես", ""}, // Armenian stays Armenian
	} {
		f := textnorm.Fold(c.in)
		if f.Text != c.want || strings.Join(f.Disguises, ",") != c.disguises {
			t.Errorf("Fold(%q) = %q %v, want %q [%s]", c.in, f.Text, f.Disguises, c.want, c.disguises)
		}
	}
	// An override also serves as an invisible character inside a word: the typed order is kept.
	f := textnorm.Fold("you wo\u202ert\u202chless idiot")
	if f.Text != "you wotrhless idiot" || f.Logical != "you worthless idiot" {
		t.Errorf("Fold = %q, logical %q; want the shown and the typed order", f.Text, f.Logical)
	}
	if f := textnorm.Fold("\u202eyadot uoy llik"); f.Logical != "yadot uoy llik" {
		t.Errorf("Fold logical = %q", f.Logical)
	}
	if f := textnorm.Fold("you \u2067roof\u2069"); f.Logical != "" {
		t.Errorf("Fold logical = %q for a text without an override", f.Logical)
	}
}

// FuzzFold: whatever the input, the folded text is valid UTF-8 without invisible, bidi or
// control characters, and folding it again changes nothing.
func FuzzFold(f *testing.F) {
	for _, s := range []string{"k1ll y0u", "k i l l", "ｋｉｌｌ", "kіll", "a\u200bb\u202ec", "1 2 3 4", "a . b . c", "$$$ !!! |||", "ﬁre", "ǅ", "4 b c", "", "\u202eab\u0301c", "a*b/c~d", "ᴋɪʟʟ ı"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := textnorm.Fold(s)
		if !utf8.ValidString(got.Text) && utf8.ValidString(s) {
			t.Fatalf("Fold(%q) = %q: not valid UTF-8", s, got.Text)
		}
		for _, r := range got.Text {
			if textnorm.IsZeroWidth(r) || textnorm.IsBidi(r) || textnorm.IsControl(r) {
				t.Fatalf("Fold(%q) = %q keeps %U", s, got.Text, r)
			}
		}
		if got.Logical != "" && !utf8.ValidString(got.Logical) && utf8.ValidString(s) {
			t.Fatalf("Fold(%q).Logical = %q: not valid UTF-8", s, got.Logical)
		}
		if again := textnorm.Fold(got.Text); again.Text != got.Text {
			t.Fatalf("Fold is not idempotent: %q → %q → %q", s, got.Text, again.Text)
		}
	})
}
