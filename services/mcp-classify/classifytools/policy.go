package classifytools

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

//go:embed policy_v1.json
var defaultPolicyJSON []byte

// Verdict is a moderation decision.
type Verdict struct {
	Flagged       bool               `json:"flagged" jsonschema:"true if any category reached its threshold"`
	Categories    []string           `json:"categories" jsonschema:"flagged categories, sorted"`
	Scores        map[string]float64 `json:"scores" jsonschema:"score per category that matched anything (threshold 1.0 unless the policy says otherwise)"`
	PolicyVersion string             `json:"policyVersion" jsonschema:"version of the policy that produced this verdict"`
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
}

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
	re     *regexp.Regexp
	weight float64
}

type policyFile struct {
	Version    string `json:"version"`
	Categories []struct {
		Name      string             `json:"name"`
		Threshold float64            `json:"threshold"`
		Terms     map[string]float64 `json:"terms"`
		Patterns  []struct {
			RE     string  `json:"re"`
			Weight float64 `json:"weight"`
		} `json:"patterns"`
	} `json:"categories"`
}

// DefaultPolicy returns the embedded policy.
func DefaultPolicy() (*Policy, error) { return ParsePolicy(defaultPolicyJSON) }

// ParsePolicy parses a policy document (same shape as policy_v1.json).
func ParsePolicy(data []byte) (*Policy, error) {
	var f policyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("moderation policy: %w", err)
	}
	if f.Version == "" {
		return nil, fmt.Errorf("moderation policy: version is required")
	}
	p := &Policy{version: f.Version}
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
			re, err := regexp.Compile("(?i)" + pt.RE)
			if err != nil {
				return nil, fmt.Errorf("moderation policy: category %s: %w", c.Name, err)
			}
			cat.patterns = append(cat.patterns, pattern{re: re, weight: pt.Weight})
		}
		p.categories = append(p.categories, cat)
	}
	return p, nil
}

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

// Moderate implements Moderator.
func (p *Policy) Moderate(_ context.Context, text string) (Verdict, error) {
	v := Verdict{Categories: []string{}, Scores: map[string]float64{}, PolicyVersion: p.version}
	norm := " " + normalize(text) + " "
	lower := strings.ToLower(text)
	for _, c := range p.categories {
		score := 0.0
		for _, t := range c.terms {
			if n := strings.Count(norm, t.phrase); n > 0 {
				score += t.weight * float64(n)
			}
		}
		for _, pt := range c.patterns {
			if n := len(pt.re.FindAllStringIndex(lower, 4)); n > 0 {
				score += pt.weight * float64(n)
			}
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
	return v, nil
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

func round2(f float64) float64 { return float64(int(f*100+0.5)) / 100 }
