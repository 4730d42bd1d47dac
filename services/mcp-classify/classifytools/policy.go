package classifytools

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/worldgate/worldgate/shared/textnorm"
)

// Embedded policy versions; the last is the default. An old version stays embedded so an
// operator can pin it (-policy-version) and so its figures can be compared.
var (
	//go:embed policy_v1.json
	policyV1JSON []byte
	//go:embed policy_v2.json
	policyV2JSON []byte
	//go:embed policy_v3.json
	policyV3JSON []byte

	embeddedPolicies  = [][]byte{policyV1JSON, policyV2JSON, policyV3JSON}
	defaultPolicyJSON = policyV3JSON
)

// Verdict is a moderation decision.
type Verdict struct {
	Flagged       bool               `json:"flagged" jsonschema:"true if any category reached its threshold"`
	Categories    []string           `json:"categories" jsonschema:"flagged categories, sorted"`
	Scores        map[string]float64 `json:"scores" jsonschema:"score per category that matched anything (threshold 1.0 unless the policy says otherwise)"`
	PolicyVersion string             `json:"policyVersion" jsonschema:"version of the policy that produced this verdict"`
	// PersonalData lists the spans of personal data found (whatever the policy flags), and
	// Redacted is the text with each replaced by a placeholder naming its kind ("[email]").
	PersonalData []PersonalData `json:"personalData,omitempty" jsonschema:"spans of personal data in the text, byte offsets"`
	Redacted     string         `json:"redacted,omitempty" jsonschema:"the text with personal data replaced by [kind] placeholders; present only when personal data was found"`
	// Disguises names how the text was disguised (textnorm: zero-width, bidi, compatibility,
	// confusable, leet, spaced, control), and Folded is the text as a reader sees it, which the
	// rules judged besides the original; both absent for plain text. The original stays the record.
	Disguises []string `json:"disguises,omitempty" jsonschema:"how the text was disguised (zero-width, bidi, control, compatibility, confusable, leet, spaced); absent for plain text"`
	Folded    string   `json:"folded,omitempty" jsonschema:"the text as a reader sees it (lower-cased), which the rules judged too; present only when it differs from the text"`
	// Language is a guess at the text's language (en, fr, es, de, pt, it; und when none fits).
	Language string `json:"language,omitempty" jsonschema:"a guess at the text's language: en, fr, es, de, pt, it, or und"`
	// Backends lists what produced the verdict when more than the rules did (e.g. rules, openai).
	Backends []string `json:"backends,omitempty" jsonschema:"the moderation backends combined into this verdict"`
}

// Moderator decides whether text violates a policy. The default is the
// embedded lexicon-and-rules Policy; a model-backed moderator can be plugged in
// behind this interface later.
type Moderator interface {
	Moderate(ctx context.Context, text string) (Verdict, error)
	Version() string
}

// Policy is a versioned lexicon-and-rules moderation policy (see policy_v1.json).
type Policy struct {
	version    string
	categories []category
	// disguiseWeight is added to a category that scored something but not enough when the text
	// hid itself from a reader's eye or a filter's (see evasive): nobody spells a greeting in
	// small capitals under a bidi override, but a threat is spelt so to get past a word list.
	disguiseWeight float64
}

// evasive are the disguises that count towards disguiseWeight: invisible and reordering
// characters and look-alike letters from other scripts. Leetspeak and spaced letters are left
// out (players write "n00b" and "g g" in banter), and so are compatibility forms (an ellipsis
// or a no-break space is one).
var evasive = []string{textnorm.Bidi, textnorm.ZeroWidth, textnorm.Confusable}

type category struct {
	name      string
	threshold float64
	terms     []term
	patterns  []pattern
}

type term struct {
	phrase string // normalized, padded with spaces
	weight float64
}

type pattern struct {
	re       *regexp.Regexp
	pre      prefilter // what a text must contain for re to match it (nil: always run re)
	detector func(found []PersonalData) bool
	scorer   scorer // a rule in code that grades the judged text (its result times weight)
	weight   float64
	lang     string // run only on texts with a function word of this language (or none at all)
}

// detectors are rules implemented in code, named by a policy pattern's "detector". They read
// what Moderate found in the text once (FindPersonalData).
var detectors = map[string]func(found []PersonalData) bool{
	"personal_data": func(found []PersonalData) bool { return len(found) > 0 },
}

// A scorer is a rule implemented in code that grades the judged text (folded, accent-stripped,
// lower-case; cased is that text through fold, for prefilters) and returns a multiple of its
// pattern's weight, negative to take points off; so far is the category's score before it.
type scorer func(judged, cased string, sofar float64) float64

// scorers are the scorers a policy pattern may name as its "detector".
var scorers = map[string]scorer{
	"menace": menace,
}

type policyFile struct {
	Version        string  `json:"version"`
	DisguiseWeight float64 `json:"disguiseWeight"`
	Categories     []struct {
		Name      string             `json:"name"`
		Threshold float64            `json:"threshold"`
		Terms     map[string]float64 `json:"terms"`
		Patterns  []struct {
			RE       string  `json:"re"`
			Detector string  `json:"detector"`
			Weight   float64 `json:"weight"`
			Lang     string  `json:"lang"`
		} `json:"patterns"`
	} `json:"categories"`
}

// DefaultPolicy returns the newest embedded policy.
func DefaultPolicy() (*Policy, error) { return ParsePolicy(defaultPolicyJSON) }

// EmbeddedPolicy returns the embedded policy of that version ("" = the default).
func EmbeddedPolicy(version string) (*Policy, error) {
	if version == "" {
		return DefaultPolicy()
	}
	var known []string
	for _, b := range embeddedPolicies {
		p, err := ParsePolicy(b)
		if err != nil {
			return nil, err
		}
		if p.version == version {
			return p, nil
		}
		known = append(known, p.version)
	}
	return nil, fmt.Errorf("moderation policy %q is not embedded (known: %s)", version, strings.Join(known, ", "))
}

// ParsePolicy parses a policy document (same shape as policy_v1.json).
func ParsePolicy(data []byte) (*Policy, error) {
	var f policyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("moderation policy: %w", err)
	}
	if f.Version == "" {
		return nil, fmt.Errorf("moderation policy: version is required")
	}
	p := &Policy{version: f.Version, disguiseWeight: f.DisguiseWeight}
	for _, c := range f.Categories {
		cat := category{name: c.Name, threshold: c.Threshold}
		if cat.threshold <= 0 {
			cat.threshold = 1
		}
		for phrase, w := range c.Terms {
			cat.terms = append(cat.terms, term{phrase: " " + normalize(phrase) + " ", weight: w})
		}
		sort.Slice(cat.terms, func(i, j int) bool { return cat.terms[i].phrase < cat.terms[j].phrase })
		for _, pt := range c.Patterns {
			if sc, ok := scorers[pt.Detector]; ok {
				cat.patterns = append(cat.patterns, pattern{scorer: sc, weight: pt.Weight})
				continue
			}
			if pt.Detector != "" {
				d, ok := detectors[pt.Detector]
				if !ok {
					return nil, fmt.Errorf("moderation policy: category %s: unknown detector %q", c.Name, pt.Detector)
				}
				cat.patterns = append(cat.patterns, pattern{detector: d, weight: pt.Weight})
				continue
			}
			re, err := regexp.Compile("(?i)" + pt.RE)
			if err != nil {
				return nil, fmt.Errorf("moderation policy: category %s: %w", c.Name, err)
			}
			if _, ok := functionWords[pt.Lang]; pt.Lang != "" && !ok {
				return nil, fmt.Errorf("moderation policy: category %s: language %q has no function words to tell it by", c.Name, pt.Lang)
			}
			cat.patterns = append(cat.patterns, pattern{re: re, pre: newPrefilter("(?i)" + pt.RE), weight: pt.Weight, lang: pt.Lang})
		}
		p.categories = append(p.categories, cat)
	}
	return p, nil
}

// noPrefilter turns the patterns' prefilters off (tests compare the verdicts with and without).
var noPrefilter = false

// Version implements Moderator.
func (p *Policy) Version() string { return p.version }

// Categories lists the policy's category names.
func (p *Policy) Categories() []string {
	out := make([]string, len(p.categories))
	for i, c := range p.categories {
		out[i] = c.name
	}
	return out
}

// Moderate implements Moderator. Each term, pattern or detector counts once; terms and
// patterns are matched against the lower-cased text, its URL- and entity-decoded form, and its
// folded form (textnorm.Fold: disguises undone); personal data is found in the text as written.
func (p *Policy) Moderate(_ context.Context, text string) (Verdict, error) {
	v := Verdict{Categories: []string{}, Scores: map[string]float64{}, PolicyVersion: p.version}
	norms := []string{" " + normalize(text) + " "}
	views := []string{strings.ToLower(text)}
	if d := strings.ToLower(decoded(text)); d != views[0] {
		views = append(views, d)
	}
	f := textnorm.Fold(text)
	judged := unaccent(f.Text)
	if judged != views[0] {
		views = append(views, judged)
		norms = append(norms, " "+normalize(judged)+" ")
	}
	judgedNorm, judgedView := norms[len(norms)-1], 0
	if judged != views[0] {
		judgedView = len(views) - 1
	}
	// A right-to-left override is judged both as shown and as typed (textnorm.Folded.Logical).
	var logical string
	if f.Logical != "" {
		logical = unaccent(f.Logical)
		views = append(views, logical)
		norms = append(norms, " "+normalize(logical)+" ")
	}
	if f.Text != views[0] {
		v.Disguises, v.Folded = f.Disguises, f.Text
	}
	evaded := false
	for _, d := range evasive {
		evaded = evaded || f.Has(d)
	}
	var langs languageScores
	v.Language, langs = guessLanguage(judgedNorm, f.Text)
	personal := FindPersonalData(text)
	folded := make([]string, len(views))
	for i, view := range views {
		folded[i] = fold(view)
	}
	for _, c := range p.categories {
		score := 0.0
		for _, t := range c.terms {
			for _, norm := range norms {
				if strings.Contains(norm, t.phrase) {
					score += t.weight
					break
				}
			}
		}
		for _, pt := range c.patterns {
			if pt.lang != "" && !langs.possible(pt.lang) {
				continue
			}
			if pt.scorer != nil {
				sc := pt.scorer(judged, folded[judgedView], score)
				if logical != "" {
					sc = max(sc, pt.scorer(logical, folded[len(views)-1], score))
				}
				score += pt.weight * sc
				continue
			}
			for i, view := range views {
				if (pt.re != nil && (noPrefilter || pt.pre.admits(folded[i])) && pt.re.MatchString(view)) || (pt.detector != nil && pt.detector(personal)) {
					score += pt.weight
					break
				}
			}
		}
		if evaded && score > 0 && score < c.threshold && c.name != "pii" {
			score += p.disguiseWeight
		}
		if score > 0 {
			v.Scores[c.name] = round2(score)
		}
		if score >= c.threshold {
			v.Flagged = true
			v.Categories = append(v.Categories, c.name)
		}
	}
	sort.Strings(v.Categories)
	if len(personal) > 0 {
		v.PersonalData, v.Redacted = personal, redact(text, personal)
	}
	return v, nil
}

// decoded undoes URL percent-encoding and HTML character references, so that encoded markup
// ("%3Cscript%3E", "&lt;script&gt;") is seen as what a client would decode it to.
func decoded(s string) string {
	if strings.Contains(s, "%") {
		if u, err := url.PathUnescape(s); err == nil {
			s = u
		}
	}
	if strings.Contains(s, "&") {
		s = html.UnescapeString(s)
	}
	return s
}

// normalize lower-cases, keeps letters, digits, apostrophes and hyphens inside
// words, and collapses everything else to single spaces.
func normalize(s string) string {
	var b strings.Builder
	space := true
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' || r == '-' {
			b.WriteRune(r)
			space = false
		} else if !space {
			b.WriteByte(' ')
			space = true
		}
	}
	return strings.TrimSpace(b.String())
}

// unaccent strips combining marks (é → e): the other languages' rules are written without
// accents, as players often type them.
func unaccent(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return norm.NFC.String(strings.Map(func(r rune) rune {
				if unicode.Is(unicode.Mn, r) {
					return -1
				}
				return r
			}, norm.NFD.String(s)))
		}
	}
	return s
}

func round2(f float64) float64 { return float64(int(f*100+0.5)) / 100 }
