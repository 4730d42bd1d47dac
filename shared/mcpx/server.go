package mcpx

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
)

// Options are the dependencies every Worldgate MCP server takes.
type Options struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: metrics are not registered
	Auth       AuthConfig            // HTTP only; stdio is trusted local use
	RateLimit  RateLimit             // per client (token issuer and subject); zero: unlimited
	// Origins are the browser origins the HTTP endpoint serves (nil:
	// DefaultAllowedOrigins).
	Origins *OriginPolicy
	// Completion answers completion/complete (nil: no completions).
	Completion func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error)
	// ArgumentHints say, per tool name, what the tool's arguments look like (a sentence with
	// an example, e.g. `give {"topic": "The Sundering"} or {"factId": "lore:sundering"}`); a
	// caller whose arguments have the wrong shape reads it in the tool error.
	ArgumentHints map[string]string
}

// HTTPHandler serves s over Streamable HTTP with these options' origins and
// authentication, requiring scope.
func (o Options) HTTPHandler(s *mcp.Server, scope string) http.Handler {
	return HTTPHandler(s, HTTPOptions{Auth: o.Auth, Scope: scope, Logger: o.Logger, Origins: o.Origins})
}

// NewServer creates an instrumented MCP server named "worldgate-<label>"
// whose tool calls all pass through Instrument.
func NewServer(label, version, instructions string, o Options) (*mcp.Server, error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := NewMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	complete := o.Completion
	if complete == nil {
		complete = noCompletions
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "worldgate-" + label, Version: version}, &mcp.ServerOptions{
		Instructions: instructions,
		// Logging is deprecated (SEP-2577) but still part of the protocol through its deprecation
		// window: clients may call logging/setLevel, so it stays advertised until it is removed.
		Capabilities:      &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}, Completions: &mcp.CompletionCapabilities{}}, //nolint:staticcheck // SA1019: see above
		CompletionHandler: complete,
	})
	Instrument(s, InstrumentOptions{Server: label, Logger: logger, Metrics: m, Limiter: NewRateLimiter(o.RateLimit), ArgumentHints: o.ArgumentHints})
	return s, nil
}

// ReadOnly returns the annotations every Worldgate tool carries.
func ReadOnly(title string) *mcp.ToolAnnotations {
	f := false
	return &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &f, Title: title}
}

// noCompletions answers completion/complete on a server without prompts or resource templates
// (the only things the specification completes): no suggestions, rather than -32601, so every
// Worldgate server answers the method the same way.
func noCompletions(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
}
