package classifytools

import (
	"context"
	"flag"
	"time"

	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// Program is mcp-classify's process.
var Program = service.MCPProgram{Name: "mcp-classify", Listen: "127.0.0.1:7403", Admin: "127.0.0.1:9403", Scope: mcpx.ScopeClassifyRead}

// ServiceConfig is mcp-classify's configuration: its flags (RegisterFlags), its process's argv
// (Args) and environment (Env).
type ServiceConfig struct {
	service.MCPProcess
	PolicyVersion string
	OpenAI, Guard ModelConfig
	ModelTimeout  time.Duration
}

// DefaultServiceConfig is the configuration with every flag at its default.
func DefaultServiceConfig() ServiceConfig {
	return service.Defaults((*ServiceConfig).RegisterFlags)
}

// RegisterFlags registers mcp-classify's flags on fs, each with its default.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	Program.RegisterFlags(fs, &c.MCPProcess)
	c.OpenAI, c.Guard = ModelConfig{}, ModelConfig{}
	fs.StringVar(&c.PolicyVersion, "policy-version", "", "moderation policy version to serve (empty: the newest embedded one)")
	fs.StringVar(&c.OpenAI.APIKey, "moderation-openai-key", "", "OpenAI API key: when set, moderate-content also asks OpenAI's moderation endpoint and combines its verdict with the rules")
	fs.StringVar(&c.OpenAI.BaseURL, "moderation-openai-url", "https://api.openai.com/v1", "OpenAI API base URL for the moderation endpoint")
	fs.StringVar(&c.OpenAI.Model, "moderation-openai-model", "omni-moderation-latest", "OpenAI moderation model")
	fs.StringVar(&c.Guard.BaseURL, "moderation-guard-url", "", "base URL of an OpenAI-compatible chat server running a Llama-Guard-style classifier (e.g. http://localhost:11434/v1); when set, moderate-content combines its verdict with the rules")
	fs.StringVar(&c.Guard.Model, "moderation-guard-model", "llama-guard3", "the guard classifier's model name")
	fs.StringVar(&c.Guard.APIKey, "moderation-guard-key", "", "API key for the guard server, if it needs one")
	fs.DurationVar(&c.ModelTimeout, "moderation-model-timeout", 5*time.Second, "timeout of one model-backed moderation request")
}

// MCPProc is the process part of the configuration (service.MCPConfig).
func (c *ServiceConfig) MCPProc() *service.MCPProcess { return &c.MCPProcess }

// Args is the argv of an mcp-classify process with this configuration.
func (c ServiceConfig) Args() []string {
	return service.Args(DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Env is the same configuration as environment variables.
func (c ServiceConfig) Env() []string {
	return service.MCPEnv(DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Start builds mcp-classify on in: the embedded moderation policy c names, combined with the
// OpenAI or guard model when their flags are set.
func Start(_ context.Context, in service.MCPInfra, c ServiceConfig) (*service.MCPServer, error) {
	rules, err := EmbeddedPolicy(c.PolicyVersion)
	if err != nil {
		return nil, err
	}
	var moderator Moderator = rules
	var models []Moderator
	if c.OpenAI.APIKey != "" {
		c.OpenAI.Timeout = c.ModelTimeout
		models = append(models, NewOpenAIModerator(c.OpenAI))
	}
	if c.Guard.BaseURL != "" {
		c.Guard.Timeout = c.ModelTimeout
		models = append(models, NewGuardModerator(c.Guard))
	}
	if len(models) > 0 {
		moderator = &Combined{Rules: rules, Models: models, Logger: in.Options.Logger}
	}
	in.Options.Logger.Info("moderation", "policy", moderator.Version())
	srv, err := New(Options{Moderator: moderator, Options: in.Options})
	if err != nil {
		return nil, err
	}
	return &service.MCPServer{MCP: srv.MCP(), Handler: srv.Handler()}, nil
}
