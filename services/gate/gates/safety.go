package gates

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/metrics"
)

// ModerateTool is the mcp-classify tool the safety gate asks.
const ModerateTool = "moderate-content"

// safety asks mcp-classify's moderate-content for a verdict on the proposal's text and rejects
// it when a flagged category is blocked by the policy version that produced the verdict.
type safety struct {
	classify ToolCaller
	cfg      SafetyConfig
	flagged  *prometheus.CounterVec
}

// Safety is the safety gate's name.
const Safety = events.GateSafety

// safetyGate declares the safety gate (see Spec).
var safetyGate = Spec{
	Name: Safety, New: newSafety,
	Summary: "the moderation verdict (mcp-classify) on the text that reaches players",
	Needs:   []Need{NeedClassifier},
}

func newSafety(_ context.Context, d Deps) (Gate, error) {
	if d.Classify == nil {
		return nil, errors.New("the safety gate needs an MCP client for mcp-classify")
	}
	return &safety{classify: d.Classify, cfg: d.Config.Safety, flagged: metrics.Register(d.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Name: "moderation_flagged_total",
		Help: "Proposals whose text the moderation verdict flagged, by category.",
	}, []string{"category"}))}, nil
}

func (*safety) Name() string { return Safety }

// verdict is moderate-content's structured output.
type verdict struct {
	Flagged       bool               `json:"flagged"`
	Categories    []string           `json:"categories"`
	Scores        map[string]float64 `json:"scores"`
	PolicyVersion string             `json:"policyVersion"`
}

func (s *safety) Check(ctx context.Context, p *events.Proposal) (Decision, error) {
	payload, err := events.DecodePayload(p.Kind, p.Payload)
	if err != nil {
		return Decision{}, err
	}
	ctx = mcpx.WithCorrelationID(ctx, p.CorrelationID)
	if text := payload.Content(); text != "" {
		v, err := s.moderate(ctx, text)
		if err != nil {
			return Decision{}, err
		}
		if d := safetyDecision(v, s.cfg); d.Outcome != Passed {
			return d, nil
		}
		// Markup and template injection are refused even where the moderation policy lets them pass: the
		// text reaches players' screens and templates, and no gate rewrites content.
		if hits := unsafeMarkup(text); len(hits) > 0 {
			s.flagged.WithLabelValues(CategoryMarkup).Inc()
			return Reject(events.CodeSafetyFlagged,
				fmt.Sprintf("The text carries markup, formatting or hidden characters (%s): committed text is plain text and would reach players' screens as it is. Write plain text, without tags, scripts, template expressions, links or invisible characters.", listOf(hits)),
				map[string]any{"categories": []string{CategoryMarkup}, "markup": hits}), nil
		}
	}
	if q, ok := payload.(events.Quoting); ok && q.Quoted() != "" {
		return s.checkQuote(ctx, q.Quoted())
	}
	return Pass(), nil
}

// moderate asks mcp-classify for text's verdict and counts its flags.
func (s *safety) moderate(ctx context.Context, text string) (verdict, error) {
	res, err := s.classify.Call(ctx, ModerateTool, map[string]any{"text": text})
	if err != nil {
		return verdict{}, fmt.Errorf("moderation unavailable: %w", err)
	}
	var v verdict
	if err := res.Decode(&v); err != nil {
		return verdict{}, fmt.Errorf("moderation verdict unreadable: %w", err)
	}
	for _, c := range v.Categories {
		s.flagged.WithLabelValues(c).Inc()
	}
	return v, nil
}

// QuoteAllowed is the one category an honest quote of a player's words may carry: the input rail
// keeps injection phrasings as data (the NPC answers them), and blocks or redacts the rest.
const QuoteAllowed = "prompt_injection"

// checkQuote refuses a quote of a player's words (events.Quoting) that carries what the input
// rail never lets through: a flagged category other than QuoteAllowed (personal data
// unredacted included), or markup.
func (s *safety) checkQuote(ctx context.Context, quote string) (Decision, error) {
	v, err := s.moderate(ctx, quote)
	if err != nil {
		return Decision{}, err
	}
	var hits []string
	for _, c := range v.Categories {
		if c != QuoteAllowed {
			hits = append(hits, c)
		}
	}
	markup := markupHits(quote)
	if len(markup) > 0 && !slices.Contains(hits, "markup_injection") {
		hits = append(hits, "markup_injection")
	}
	if len(hits) == 0 {
		return Pass(), nil
	}
	sort.Strings(hits)
	return Reject(events.CodeSafetyFlagged,
		fmt.Sprintf("The player's words quoted with the line (playerSaid) carry %s under moderation policy %s, which the input rail never lets through: quote the player's words as the rail left them.", listOf(hits), v.PolicyVersion),
		map[string]any{"categories": hits, "field": "playerSaid", "policyVersion": v.PolicyVersion}), nil
}

// CategoryMarkup is the safety category of markup and template injection.
const CategoryMarkup = "markup"

// markupPatterns are the forms of markup and template injection refused in content text: HTML
// tags and comments, script URLs, and the expression syntaxes of common template engines and
// lookup languages ({{…}}, ${…}, {%…%}, <%…%>, #{…}).
var markupPatterns = []struct {
	name string
	re   *regexp.Regexp
}{
	{"an HTML tag", regexp.MustCompile(`(?i)<\s*/?\s*[a-z][a-z0-9-]*(\s[^<>]*)?/?\s*>|<\s*(script|iframe|img|svg|object|embed|style|link|meta|a)\b|<!--`)},
	{"a script URL", regexp.MustCompile(`(?i)\b(javascript|vbscript|data\s*:\s*text/html)\s*:|\bjavascript\s*&colon;`)},
	{"a template expression", regexp.MustCompile(`\{\{|\}\}|\{%|%\}|<%|%>|\$\{|#\{`)},
	{"an event-handler attribute", regexp.MustCompile(`(?i)\bon(load|error|click|mouseover|focus)\s*=`)},
}

// markupHits names the forms of markup text carries.
func markupHits(text string) []string {
	var out []string
	for _, p := range markupPatterns {
		if p.re.MatchString(text) {
			out = append(out, p.name)
		}
	}
	return out
}

// safetyDecision is the pure rule: the verdict's flagged categories that the policy version's
// configuration blocks.
func safetyDecision(v verdict, cfg SafetyConfig) Decision {
	blocked, ok := cfg.Blocked[v.PolicyVersion]
	if !ok {
		blocked, ok = cfg.Blocked["*"]
	}
	var hits []string
	for _, c := range v.Categories {
		if !ok || slices.Contains(blocked, c) {
			hits = append(hits, c)
		}
	}
	if len(hits) == 0 {
		return Pass()
	}
	sort.Strings(hits)
	scores := map[string]float64{}
	for _, c := range hits {
		scores[c] = v.Scores[c]
	}
	return Reject(events.CodeSafetyFlagged,
		fmt.Sprintf("The text was flagged for %s under moderation policy %s: rewrite it without that content.", listOf(hits), v.PolicyVersion),
		map[string]any{"categories": hits, "policyVersion": v.PolicyVersion, "scores": scores})
}
