package classifytools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Model-backed moderation behind the same tool: OpenAI's moderation endpoint (through the
// official SDK) and a Llama-Guard-style classifier served by any OpenAI-compatible chat
// server. Combined joins them with the rules: the verdict flags the union of the categories,
// each category's score is the highest any backend gave, and the rules alone find personal
// data (spans and redaction) and markup, which the models do not report.

// ModelConfig configures one model-backed backend.
type ModelConfig struct {
	// BaseURL of the API (OpenAI: https://api.openai.com/v1; a Llama Guard server: its
	// OpenAI-compatible root, e.g. http://localhost:8000/v1).
	BaseURL string
	APIKey  string
	// Model: default omni-moderation-latest (OpenAI) or llama-guard3 (guard).
	Model string
	// Timeout per request (default 5 s).
	Timeout    time.Duration
	HTTPClient *http.Client
}

func (c ModelConfig) client(defaultModel string) (openai.Client, string) {
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	opts := []option.RequestOption{option.WithHTTPClient(hc), option.WithMaxRetries(1), option.WithRequestTimeout(timeout)}
	if c.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(c.BaseURL))
	}
	key := c.APIKey
	if key == "" {
		key = "none" // local guard servers take any key; the SDK wants one
	}
	opts = append(opts, option.WithAPIKey(key))
	model := c.Model
	if model == "" {
		model = defaultModel
	}
	return openai.NewClient(opts...), model
}

// OpenAIModerator asks OpenAI's moderation endpoint.
type OpenAIModerator struct {
	client openai.Client
	model  string
}

// NewOpenAIModerator returns a moderator on POST {BaseURL}/moderations.
func NewOpenAIModerator(c ModelConfig) *OpenAIModerator {
	cl, model := c.client(string(openai.ModerationModelOmniModerationLatest))
	return &OpenAIModerator{client: cl, model: model}
}

// Version implements Moderator.
func (m *OpenAIModerator) Version() string { return "openai/" + m.model }

// openAICategories maps OpenAI's categories onto the policy's. Plain "violence" is not mapped:
// fantasy combat ("kill the dragon") is allowed; graphic violence and violent wrongdoing are.
var openAICategories = map[string]string{
	"harassment": "harassment", "harassment/threatening": "threat",
	"hate": "hate", "hate/threatening": "hate",
	"self-harm": "self_harm", "self-harm/intent": "self_harm", "self-harm/instructions": "self_harm",
	"sexual": "sexual", "sexual/minors": "sexual",
	"violence/graphic": "violence_extreme", "illicit/violent": "violence_extreme",
}

// Moderate implements Moderator.
func (m *OpenAIModerator) Moderate(ctx context.Context, text string) (Verdict, error) {
	res, err := m.client.Moderations.New(ctx, openai.ModerationNewParams{
		Input: openai.ModerationNewParamsInputUnion{OfString: openai.String(text)},
		Model: openai.ModerationModel(m.model),
	})
	if err != nil {
		return Verdict{}, fmt.Errorf("openai moderation: %w", err)
	}
	if len(res.Results) == 0 {
		return Verdict{}, errors.New("openai moderation: no result")
	}
	r := res.Results[0]
	flags := map[string]bool{
		"harassment": r.Categories.Harassment, "harassment/threatening": r.Categories.HarassmentThreatening,
		"hate": r.Categories.Hate, "hate/threatening": r.Categories.HateThreatening,
		"self-harm": r.Categories.SelfHarm, "self-harm/intent": r.Categories.SelfHarmIntent, "self-harm/instructions": r.Categories.SelfHarmInstructions,
		"sexual": r.Categories.Sexual, "sexual/minors": r.Categories.SexualMinors,
		"violence/graphic": r.Categories.ViolenceGraphic, "illicit/violent": r.Categories.IllicitViolent,
	}
	scores := map[string]float64{
		"harassment": r.CategoryScores.Harassment, "harassment/threatening": r.CategoryScores.HarassmentThreatening,
		"hate": r.CategoryScores.Hate, "hate/threatening": r.CategoryScores.HateThreatening,
		"self-harm": r.CategoryScores.SelfHarm, "self-harm/intent": r.CategoryScores.SelfHarmIntent, "self-harm/instructions": r.CategoryScores.SelfHarmInstructions,
		"sexual": r.CategoryScores.Sexual, "sexual/minors": r.CategoryScores.SexualMinors,
		"violence/graphic": r.CategoryScores.ViolenceGraphic, "illicit/violent": r.CategoryScores.IllicitViolent,
	}
	v := Verdict{Categories: []string{}, Scores: map[string]float64{}, PolicyVersion: m.Version()}
	for name, ours := range openAICategories {
		if s := scores[name]; s > v.Scores[ours] {
			v.Scores[ours] = round2(s)
		}
		if flags[name] && !slices.Contains(v.Categories, ours) {
			v.Categories = append(v.Categories, ours)
		}
	}
	for k, s := range v.Scores {
		if s == 0 {
			delete(v.Scores, k)
		}
	}
	sort.Strings(v.Categories)
	v.Flagged = len(v.Categories) > 0
	return v, nil
}

// GuardModerator asks a Llama-Guard-style classifier through an OpenAI-compatible chat
// completions endpoint: the text goes as the user turn; the model answers "safe" or "unsafe"
// and, on the next line, the violated hazard codes (S1..S14, MLCommons taxonomy).
type GuardModerator struct {
	client openai.Client
	model  string
}

// NewGuardModerator returns a moderator on POST {BaseURL}/chat/completions.
func NewGuardModerator(c ModelConfig) *GuardModerator {
	cl, model := c.client("llama-guard3")
	return &GuardModerator{client: cl, model: model}
}

// Version implements Moderator.
func (m *GuardModerator) Version() string { return "guard/" + m.model }

// guardCategories maps Llama Guard 3's hazard codes onto the policy's categories; codes
// without an equivalent (S2 non-violent crimes, S5 defamation, S6 specialised advice, S8
// intellectual property, S13 elections, S14 code-interpreter abuse) are not flags. S14 is not
// prompt injection: Llama Guard 3 has no injection code (Meta's Prompt Guard is the separate
// classifier for that). The taxonomy table: testdata/moderation/outside/GUIDE.md.
var guardCategories = map[string]string{
	"S1": "violence_extreme", "S3": "sexual", "S4": "sexual", "S7": "pii", "S9": "violence_extreme",
	"S10": "hate", "S11": "self_harm", "S12": "sexual",
}

// Moderate implements Moderator.
func (m *GuardModerator) Moderate(ctx context.Context, text string) (Verdict, error) {
	res, err := m.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:       m.model,
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
		Temperature: openai.Float(0),
		MaxTokens:   openai.Int(20),
	})
	if err != nil {
		return Verdict{}, fmt.Errorf("guard moderation: %w", err)
	}
	if len(res.Choices) == 0 {
		return Verdict{}, errors.New("guard moderation: no choice")
	}
	return parseGuard(res.Choices[0].Message.Content, m.Version())
}

// parseGuard reads "safe" or "unsafe\nS1,S10".
func parseGuard(content, version string) (Verdict, error) {
	v := Verdict{Categories: []string{}, Scores: map[string]float64{}, PolicyVersion: version}
	lines := strings.Fields(strings.ReplaceAll(strings.TrimSpace(content), ",", " "))
	if len(lines) == 0 {
		return v, errors.New("guard moderation: empty answer")
	}
	switch strings.ToLower(lines[0]) {
	case "safe":
		return v, nil
	case "unsafe":
	default:
		return v, fmt.Errorf("guard moderation: answer %q is neither safe nor unsafe", firstN(content, 40))
	}
	for _, code := range lines[1:] {
		if ours, ok := guardCategories[strings.ToUpper(code)]; ok && !slices.Contains(v.Categories, ours) {
			v.Categories = append(v.Categories, ours)
			v.Scores[ours] = 1
		}
	}
	sort.Strings(v.Categories)
	v.Flagged = len(v.Categories) > 0
	return v, nil
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Combined is the rules policy joined with model backends.
type Combined struct {
	Rules  *Policy
	Models []Moderator
	Logger *slog.Logger
	// OnModelError is told each time a backend fails (for a metric); may be nil.
	OnModelError func(backend string)
}

// Version implements Moderator: the rules' version and each backend's, joined with "+" (a
// verdict names only the backends that answered).
func (c *Combined) Version() string {
	parts := []string{c.Rules.Version()}
	for _, m := range c.Models {
		parts = append(parts, m.Version())
	}
	return strings.Join(parts, "+")
}

// Moderate implements Moderator. A model backend that fails (after the SDK's one retry) is
// left out of the verdict, which then says so in backends: the rules always answer, so the
// safety gate never stalls on a provider outage, and the verdict shows which checks ran.
func (c *Combined) Moderate(ctx context.Context, text string) (Verdict, error) {
	v, err := c.Rules.Moderate(ctx, text)
	if err != nil {
		return v, err
	}
	v.Backends = []string{"rules"}
	type answer struct {
		v   Verdict
		err error
	}
	answers := make([]chan answer, len(c.Models))
	for i, m := range c.Models {
		answers[i] = make(chan answer, 1)
		go func() {
			mv, err := m.Moderate(ctx, text)
			answers[i] <- answer{mv, err}
		}()
	}
	for i, m := range c.Models {
		a := <-answers[i]
		if a.err != nil {
			if c.Logger != nil {
				c.Logger.Warn("moderation backend failed; verdict without it", "backend", m.Version(), "error", a.err)
			}
			if c.OnModelError != nil {
				c.OnModelError(m.Version())
			}
			continue
		}
		v.Backends = append(v.Backends, m.Version())
		for _, cat := range a.v.Categories {
			if !slices.Contains(v.Categories, cat) {
				v.Categories = append(v.Categories, cat)
			}
		}
		for cat, s := range a.v.Scores {
			if s > v.Scores[cat] {
				v.Scores[cat] = s
			}
		}
	}
	sort.Strings(v.Categories)
	v.Flagged = len(v.Categories) > 0
	// The version names what produced this verdict: the rules and the backends that answered.
	v.PolicyVersion = strings.Join(append([]string{c.Rules.Version()}, v.Backends[1:]...), "+")
	return v, nil
}

// ParseGuardAnswer reads a Llama Guard answer ("safe", or "unsafe" and hazard codes).
func ParseGuardAnswer(content string) (Verdict, error) { return parseGuard(content, "guard") }
