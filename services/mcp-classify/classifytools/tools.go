// Package classifytools holds mcp-classify's tools: classify-intent and
// moderate-content. New builds the MCP server; Handler serves it over
// Streamable HTTP behind bearer authentication (scope classify:read).
package classifytools

import (
	"context"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// Version of the server.
const Version = "1.0.0"

// Input limits.
const (
	MaxUtteranceLen = 2000
	MaxContentLen   = 20000
)

// Options configure the server.
type Options struct {
	mcpx.Options
	// Moderator defaults to the embedded policy; Classifier to KeywordClassifier.
	Moderator  Moderator
	Classifier IntentClassifier
}

// Server is mcp-classify.
type Server struct {
	mcp  *mcp.Server
	opts Options
}

// ClassifyIntentInput is classify-intent's input.
type ClassifyIntentInput struct {
	Utterance string `json:"utterance" jsonschema:"what the player said (1..2000 characters)"`
}

// ModerateContentInput is moderate-content's input.
type ModerateContentInput struct {
	Text string `json:"text" jsonschema:"text to check (1..20000 characters)"`
}

// New builds the server and its tools.
func New(o Options) (*Server, error) {
	if o.Moderator == nil {
		p, err := DefaultPolicy()
		if err != nil {
			return nil, err
		}
		o.Moderator = p
	}
	if o.Classifier == nil {
		o.Classifier = KeywordClassifier{}
	}
	s, err := mcpx.NewServer("classify", Version,
		"Read-only classification: classify-intent labels a player utterance; moderate-content checks text against the versioned moderation policy.", o.Options)
	if err != nil {
		return nil, err
	}
	srv := &Server{mcp: s, opts: o}
	mcp.AddTool(s, &mcp.Tool{
		Name:        "classify-intent",
		Description: "Classify what a player's utterance to an NPC intends: greet, farewell, ask_about, trade, threaten, quest or other, with a confidence in 0..1. Deterministic.",
		Annotations: mcpx.ReadOnly("Classify intent"),
		InputSchema: mcpx.InputSchema[ClassifyIntentInput](map[string]mcpx.Limit{"utterance": mcpx.StrLen(1, MaxUtteranceLen)}),
	}, srv.classifyIntent)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "moderate-content",
		Description: "Check text against the moderation policy. Returns flagged, the flagged categories (violence_extreme, self_harm, sexual, hate, harassment, threat, pii, prompt_injection, markup_injection), per-category scores, the policy version, and when personal data is found its spans and the text with each replaced by a [kind] placeholder.",
		Annotations: mcpx.ReadOnly("Moderate content"),
		InputSchema: mcpx.InputSchema[ModerateContentInput](map[string]mcpx.Limit{"text": mcpx.StrLen(1, MaxContentLen)}),
	}, srv.moderate)
	return srv, nil
}

// MCP returns the MCP server (for stdio or in-memory transports).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Handler serves the MCP endpoint over Streamable HTTP (mount it at /mcp).
func (s *Server) Handler() http.Handler {
	return s.opts.HTTPHandler(s.mcp, mcpx.ScopeClassifyRead)
}

func (s *Server) classifyIntent(ctx context.Context, _ *mcp.CallToolRequest, in ClassifyIntentInput) (*mcp.CallToolResult, IntentResult, error) {
	if strings.TrimSpace(in.Utterance) == "" {
		return nil, IntentResult{}, mcpx.InvalidInput("utterance must not be blank")
	}
	if len(in.Utterance) > MaxUtteranceLen {
		return nil, IntentResult{}, mcpx.InvalidInput("utterance is %d bytes; at most %d allowed", len(in.Utterance), MaxUtteranceLen)
	}
	r, err := s.opts.Classifier.ClassifyIntent(ctx, in.Utterance)
	return nil, r, err
}

func (s *Server) moderate(ctx context.Context, _ *mcp.CallToolRequest, in ModerateContentInput) (*mcp.CallToolResult, Verdict, error) {
	if strings.TrimSpace(in.Text) == "" {
		return nil, Verdict{}, mcpx.InvalidInput("text must not be blank")
	}
	if len(in.Text) > MaxContentLen {
		return nil, Verdict{}, mcpx.InvalidInput("text is %d bytes; at most %d allowed", len(in.Text), MaxContentLen)
	}
	v, err := s.opts.Moderator.Moderate(ctx, in.Text)
	return nil, v, err
}
