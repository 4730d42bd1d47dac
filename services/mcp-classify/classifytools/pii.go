package classifytools

import (
	"math/big"
	"regexp"
	"sort"
	"strings"
)

// Personal-data kinds a detector reports (and the placeholder redaction writes).
const (
	PIIEmail    = "email"
	PIIPhone    = "phone"
	PIICard     = "card"
	PIIIBAN     = "iban"
	PIIGovID    = "gov_id"
	PIIPassport = "passport"
	PIIAddress  = "address"
)

// PersonalData is one span of personal data found in a text (byte offsets into the text as
// given, end exclusive).
type PersonalData struct {
	Kind  string `json:"kind" jsonschema:"email, phone, card, iban, gov_id, passport or address"`
	Start int    `json:"start" jsonschema:"byte offset where the span starts"`
	End   int    `json:"end" jsonschema:"byte offset after the span"`
}

var (
	reEmail = regexp.MustCompile(`(?i)\b[a-z0-9._%+-]+\s?@\s?[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b`)
	// "lena at example dot com", "lena (at) example [dot] org".
	reEmailSpelt = regexp.MustCompile(`(?i)\b[a-z0-9._%+-]+\s*(?:\(at\)|\[at\]|\s+at\s+)\s*[a-z0-9-]+\s*(?:\(dot\)|\[dot\]|\s+dot\s+)\s*(?:com|org|net|edu|gov|io|co|uk|de|fr|nl|es|it|me|info)\b`)
	// A run of digit groups joined by single separators, optionally led by + or (.
	reDigits   = regexp.MustCompile(`(?:\+|\(\+?)?\d[\d]*(?:(?:[ .\-]|\) ?|\)|-\()?\d+)*`)
	reSSN      = regexp.MustCompile(`\b\d{3}-\d{2}-\d{4}\b`)
	reIBAN     = regexp.MustCompile(`\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b`)
	rePassport = regexp.MustCompile(`(?i)\bpassport(?:\s+(?:number|no\.?|nr\.?|#))?\s*:?\s*([A-Z0-9]{6,9})\b`)
	// A house number, one to four words and a street type ("42 Maple Avenue", "221B Baker
	// Street", "1600 Pennsylvania Ave NW"), or a number after a street name that ends in a
	// street word ("Hauptstraße 5", "Rue de Rivoli" with a number before it).
	reAddress = regexp.MustCompile(`(?i)\b\d{1,5}[a-z]?,?\s+(?:(?:rue|via|calle|avenida|chemin|boulevard)\s+(?:d[eu']\s*|de la\s+|del\s+)?[\p{L}'-]+|(?:[\p{L}'.-]+\s+){1,4}(?:street|st|avenue|ave|road|rd|lane|ln|boulevard|blvd|drive|dr|way|court|ct|place|pl|terrace|crescent|close|square|sq|parkway|pkwy|highway|hwy)\b\.?)`)
	reStrasse = regexp.MustCompile(`(?i)\b[\p{L}-]+(?:straße|strasse|str\.|weg|gasse|allee|platz|laan|straat|gracht|vej|gatan|gata)\s+\d{1,4}[a-z]?\b`)
)

// FindPersonalData returns the spans of personal data in text, sorted, without overlaps (the
// earlier, then the longer span wins).
func FindPersonalData(text string) []PersonalData {
	var out []PersonalData
	add := func(kind string, loc []int) { out = append(out, PersonalData{Kind: kind, Start: loc[0], End: loc[1]}) }
	for _, loc := range reEmail.FindAllStringIndex(text, -1) {
		add(PIIEmail, loc)
	}
	for _, loc := range reEmailSpelt.FindAllStringIndex(text, -1) {
		add(PIIEmail, loc)
	}
	for _, loc := range reSSN.FindAllStringIndex(text, -1) {
		add(PIIGovID, loc)
	}
	for _, loc := range rePassport.FindAllStringSubmatchIndex(text, -1) {
		if hasDigit(text[loc[2]:loc[3]]) {
			add(PIIPassport, loc[2:4])
		}
	}
	for _, loc := range reIBAN.FindAllStringIndex(text, -1) {
		if validIBAN(text[loc[0]:loc[1]]) {
			add(PIIIBAN, loc)
		}
	}
	for _, loc := range reAddress.FindAllStringIndex(text, -1) {
		add(PIIAddress, loc)
	}
	for _, loc := range reStrasse.FindAllStringIndex(text, -1) {
		add(PIIAddress, loc)
	}
	for _, loc := range reDigits.FindAllStringIndex(text, -1) {
		if kind := digitKind(text, loc[0], loc[1]); kind != "" {
			add(kind, loc)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Start != out[j].Start {
			return out[i].Start < out[j].Start
		}
		return out[i].End > out[j].End
	})
	kept := out[:0]
	for _, p := range out {
		if len(kept) > 0 && p.Start < kept[len(kept)-1].End {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// digitKind classifies a run of digit groups: a card-like number (13..19 digits passing the
// Luhn check), a phone number (an international "+" number of 8..15 digits, or 9..12 digits
// written in groups or starting with 0), or nothing (prices, years, times, counts).
func digitKind(text string, start, end int) string {
	s := text[start:end]
	digits := onlyDigits(s)
	n := len(digits)
	if start > 0 && (text[start-1] == ',' || text[start-1] == ':' || text[start-1] == '/') {
		return ""
	}
	if n >= 13 && n <= 19 && luhn(digits) {
		return PIICard
	}
	if strings.HasPrefix(s, "+") || strings.HasPrefix(s, "(+") {
		if n >= 8 && n <= 15 {
			return PIIPhone
		}
		return ""
	}
	grouped := strings.ContainsAny(s, " .-()")
	switch {
	case n >= 10 && n <= 12 && (grouped || digits[0] == '0' || digits[0] == '1'):
		return PIIPhone
	case n == 9 && grouped && strings.Count(strings.TrimSpace(s), " ")+strings.Count(s, "-")+strings.Count(s, ".") >= 2:
		return PIIPhone
	case n >= 10 && n <= 15 && grouped:
		return PIIPhone
	}
	return ""
}

func onlyDigits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func hasDigit(s string) bool { return strings.ContainsAny(s, "0123456789") }

func luhn(digits string) bool {
	sum, double := 0, false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// validIBAN checks the ISO 13616 mod-97 checksum.
func validIBAN(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	r := s[4:] + s[:4]
	var b strings.Builder
	for _, c := range r {
		switch {
		case c >= '0' && c <= '9':
			b.WriteRune(c)
		case c >= 'A' && c <= 'Z':
			b.WriteString(big.NewInt(int64(c - 'A' + 10)).String())
		default:
			return false
		}
	}
	n, ok := new(big.Int).SetString(b.String(), 10)
	return ok && new(big.Int).Mod(n, big.NewInt(97)).Int64() == 1
}

// Redact replaces every span of personal data with a placeholder naming its kind
// ("[email]", "[phone]", …) and returns the text and the spans it replaced (offsets into the
// original text).
func Redact(text string) (string, []PersonalData) {
	spans := FindPersonalData(text)
	if len(spans) == 0 {
		return text, nil
	}
	return redact(text, spans), spans
}

// redact replaces spans (FindPersonalData's, in order) of text with their kinds.
func redact(text string, spans []PersonalData) string {
	var b strings.Builder
	last := 0
	for _, p := range spans {
		b.WriteString(text[last:p.Start])
		b.WriteString("[" + p.Kind + "]")
		last = p.End
	}
	b.WriteString(text[last:])
	return b.String()
}
