package aiworker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// Program is the ai-worker's process, on NATS as ai-worker.
var Program = service.Program{Name: "ai-worker", NATSUser: "ai-worker", Admin: "127.0.0.1:9420",
	Lag: []string{events.StreamWorld, events.StreamProposals}, GC: gctune.ShortLived}

// ServiceConfig is the ai-worker's configuration: its flags (RegisterFlags), its process's argv
// (Args) and environment (Env).
type ServiceConfig struct {
	service.Process
	LLMConfig, LLMProvider, LLMBaseURL, LLMKeyEnv string
	LLMModel, LLMRichModel                        string
	WorldURL, LoreURL, ClassifyURL, MCPToken      string
	Routes, Roles, AttestKeys                     string
	Budgets                                       string // budget file; empty: no budgets
	Offenders                                     budget.OffenderPolicy
	ToolBudget                                    int
	FreshFor, AckWait, MaxTask, MaxSkew, MaxAge   time.Duration
}

// DefaultServiceConfig is the configuration with every flag at its default.
func DefaultServiceConfig() ServiceConfig {
	return service.Defaults((*ServiceConfig).RegisterFlags)
}

// RegisterFlags registers the ai-worker's flags on fs, each with its default.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	Program.RegisterFlags(fs, &c.Process)
	fs.StringVar(&c.LLMConfig, "llm-config", "", "YAML provider configuration (services/ai-worker/llmsetup); overrides the -llm-provider flags")
	fs.StringVar(&c.LLMProvider, "llm-provider", "scripted", "scripted (offline default), openai (any OpenAI-compatible API) or anthropic")
	fs.StringVar(&c.LLMBaseURL, "llm-base-url", "", "base URL of the OpenAI-compatible or Anthropic API (empty: the vendor's)")
	fs.StringVar(&c.LLMKeyEnv, "llm-api-key-env", "WORLDGATE_LLM_API_KEY", "name of the environment variable holding the API key")
	fs.StringVar(&c.LLMModel, "llm-model", "", "model of the cheap tier (ambience, npc_dialogue)")
	fs.StringVar(&c.LLMRichModel, "llm-rich-model", "", "model of the rich tier (quest_seed); default -llm-model")
	fs.StringVar(&c.WorldURL, "mcp-world-url", "http://127.0.0.1:7401/mcp", "mcp-world Streamable HTTP endpoint")
	fs.StringVar(&c.LoreURL, "mcp-lore-url", "http://127.0.0.1:7402/mcp", "mcp-lore Streamable HTTP endpoint")
	fs.StringVar(&c.ClassifyURL, "mcp-classify-url", "http://127.0.0.1:7403/mcp", "mcp-classify Streamable HTTP endpoint")
	fs.StringVar(&c.MCPToken, "mcp-token", "", "bearer token for the MCP servers (scopes world:read, lore:read, classify:read)")
	fs.StringVar(&c.Routes, "routes", "", "routes per proposal kind (YAML; default: the embedded routes)")
	fs.StringVar(&c.AttestKeys, "attest-keys", "", "directory of the gates' public keys, <gate>.pub and <gate>.<id>.pub during a rotation (docs/attestation.md); required: a rejection is followed only when the gates' signatures show it refuses a proposal this worker sent")
	fs.StringVar(&c.Roles, "roles", "", "comma-separated roles to run ("+strings.Join(roles.Names(), ",")+"); empty: all")
	fs.StringVar(&c.Budgets, "budgets", "", "LLM budget file (docs/budgets.md); empty: no budgets. A bad file stops start-up")
	fs.IntVar(&c.Offenders.Threshold, "offender-threshold", 3, "with -budgets: this many flagged utterances of one player within -offender-window make a repeat-offender strike")
	fs.DurationVar(&c.Offenders.Window, "offender-window", time.Hour, "with -budgets: how long a flagged utterance counts towards a strike")
	fs.Float64Var(&c.Offenders.Multiplier, "offender-multiplier", 0.5, "with -budgets: a strike scales the player's per-actor budgets by this (strike k: its k-th power, at least 0.1)")
	fs.DurationVar(&c.Offenders.CoolDown, "offender-cool-down", 2*time.Minute, "with -budgets: after a strike none of the player's calls is paid for this long (static content instead)")
	fs.DurationVar(&c.Offenders.Decay, "offender-decay", 24*time.Hour, "with -budgets: a strike's tighter limits return linearly to the file's over this long")
	fs.IntVar(&c.ToolBudget, "tool-budget", 6, "hard cap of MCP tool calls per task")
	fs.DurationVar(&c.FreshFor, "ambience-fresh-for", 10*time.Minute, "skip ambience for a location whose ambience is younger than this (negative: never skip)")
	fs.DurationVar(&c.AckWait, "ack-wait", 10*time.Second, "how soon a crashed worker's triggers are redelivered (a live worker keeps those it works on in progress, up to -max-task)")
	fs.DurationVar(&c.MaxTask, "max-task", 3*time.Minute, "how long a task may take, model retries included, before its trigger is left for redelivery")
	fs.DurationVar(&c.MaxSkew, "max-clock-skew", 5*time.Minute, "refuse world events whose occurredUtc is further in the future than this")
	fs.DurationVar(&c.MaxAge, "max-event-age", 24*time.Hour, "refuse world events older than this (negative: no limit)")
}

// Proc is the process part of the configuration (service.Config).
func (c *ServiceConfig) Proc() *service.Process { return &c.Process }

// Check reports a configuration the ai-worker cannot start with: a bad budget file names its
// line and field here, before anything starts.
func (c *ServiceConfig) Check() error {
	if c.AttestKeys == "" {
		return errors.New("-attest-keys is required: a rejection is followed (reprompted, retried, fallen back) only when the gates' signatures show it refuses a proposal this worker sent (docs/attestation.md)")
	}
	if c.Budgets != "" {
		if _, err := budget.LoadConfig(c.Budgets); err != nil {
			return err
		}
	}
	_, err := route.Load(c.Routes)
	return err
}

// Args is the argv of an ai-worker process with this configuration.
func (c ServiceConfig) Args() []string {
	return service.Args(DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Env is the same configuration as environment variables.
func (c ServiceConfig) Env() []string {
	return service.Env(Program, DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Service is a started ai-worker.
type Service struct {
	Run service.Run
	// Ledger is its LLM budget ledger and Offenders its repeat-offender counter (nil without
	// -budgets); the ledger starts with Run.
	Ledger    *budget.Ledger
	Offenders *budget.Offenders
	LLM       *llm.Registry
}

// Start runs the ai-worker on in: the budget ledger (with -budgets), the LLM providers, the
// MCP servers (in.MCP, or the -mcp-*-url flags) and the roles' handlers.
func Start(ctx context.Context, in service.Infra, c ServiceConfig) (_ *Service, err error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	var closers []func()
	defer func() {
		if err != nil {
			for _, f := range closers {
				f()
			}
		}
	}()
	routes, err := route.Load(c.Routes)
	if err != nil {
		return nil, err
	}
	keyring, err := attest.LoadKeyring(c.AttestKeys)
	if err != nil {
		return nil, err
	}
	s := &Service{}
	var admit llm.Admitter
	if c.Budgets != "" {
		cfg, err := budget.LoadConfig(c.Budgets)
		if err != nil {
			return nil, err
		}
		var bk budget.Buckets
		if err := natsx.Await(ctx, "budget buckets", in.Logger, func(ctx context.Context) (err error) {
			bk, err = budget.OpenBuckets(ctx, in.JetStream)
			return err
		}); err != nil {
			return nil, err
		}
		bm, err := budget.NewMetrics(in.Registerer)
		if err != nil {
			return nil, err
		}
		log := in.Logger.With("component", "budget")
		if s.Ledger, err = budget.NewLedger(ctx, bk, cfg, budget.Options{Metrics: bm, Logger: log}); err != nil {
			return nil, err
		}
		in.Registerer.MustRegister(budget.NewCollector(bk, log))
		admit = s.Ledger
		// Repeat offenders: the input rail's flags tighten a player's per-actor budgets.
		if s.Offenders, err = budget.NewOffenders(bk.Control, c.Offenders, in.Registerer, log, nil); err != nil {
			return nil, err
		}
	}
	if s.LLM, err = c.buildLLM(llmsetup.Options{Registerer: in.Registerer, Logger: in.Logger.With("component", "llm"), Admitter: admit}); err != nil {
		return nil, err
	}
	kv, err := natsx.AwaitKeyValue(ctx, in.JetStream, natsx.BucketAICache, in.Logger)
	if err != nil {
		return nil, fmt.Errorf("AI cache: %w (start with -provision or provision the topology first)", err)
	}
	var tools *client.Client
	if in.MCP != nil {
		tools, err = in.MCP(ctx, "world", "lore", "classify")
	} else {
		tools, err = client.New(ctx, client.Config{Logger: in.Logger, Servers: []client.ServerConfig{
			{Name: "world", URL: c.WorldURL, Token: c.MCPToken},
			{Name: "lore", URL: c.LoreURL, Token: c.MCPToken},
			{Name: "classify", URL: c.ClassifyURL, Token: c.MCPToken},
		}})
		if err == nil {
			closers = append(closers, func() { _ = tools.Close() })
		}
	}
	if err != nil {
		return nil, err
	}
	app, err := runtime.New(runtime.Options{Name: "ai-worker", Description: "Worldgate agent roles", Conn: in.Conn, JetStream: in.JetStream,
		Registerer: in.Registerer, Logger: in.Logger})
	if err != nil {
		return nil, err
	}
	var roleNames []string
	if c.Roles != "" {
		for _, r := range strings.Split(c.Roles, ",") {
			roleNames = append(roleNames, strings.TrimSpace(r))
		}
	}
	deps := Deps{LLM: s.LLM, Tools: tools, KV: kv, Committed: in.JetStream, Routes: routes, Keyring: keyring, Registerer: in.Registerer, Logger: in.Logger,
		Roles: roleNames, ToolBudget: c.ToolBudget, AmbienceFreshFor: c.FreshFor, AckWait: c.AckWait, MaxTask: c.MaxTask,
		MaxClockSkew: c.MaxSkew, MaxEventAge: c.MaxAge}
	if s.Offenders != nil {
		deps.OnInputFlag = s.Offenders.OnFlag
	}
	if err := Register(app, deps); err != nil {
		return nil, err
	}
	in.Admin.AddCheck("handlers", app.Ready)
	in.Admin.AddCheck("mcp", func(context.Context) error {
		var down []string
		for _, h := range tools.Health() {
			if !h.Available {
				down = append(down, h.Name+": "+h.LastError)
			}
		}
		if len(down) > 0 {
			// Tasks fall back to static content meanwhile; readiness tells the operator.
			return errors.New("MCP servers unavailable: " + strings.Join(down, "; "))
		}
		return nil
	})
	// Each LLM target's circuit: an open one is failed over, so it is detail, not unreadiness.
	in.Admin.AddDetail("llm", func(context.Context) any { return s.LLM.Health() })
	in.Logger.Info("ai-worker registered", "llm", llmTiers(s.LLM), "roles", roleNames)
	s.Run = func(ctx context.Context) error {
		defer func() {
			for _, f := range closers {
				f()
			}
		}()
		if s.Ledger != nil {
			if err := s.Ledger.Start(ctx); err != nil {
				return err
			}
			defer s.Ledger.Close()
		}
		return app.Run(ctx)
	}
	return s, nil
}

func (c *ServiceConfig) buildLLM(opts llmsetup.Options) (*llm.Registry, error) {
	if c.LLMConfig != "" {
		return llmsetup.Load(c.LLMConfig, opts)
	}
	switch c.LLMProvider {
	case "", "scripted":
		return llmsetup.Default(opts)
	case "openai", "anthropic":
		if c.LLMModel == "" {
			return nil, fmt.Errorf("-llm-provider %s needs -llm-model", c.LLMProvider)
		}
		rich := c.LLMRichModel
		if rich == "" {
			rich = c.LLMModel
		}
		file := llmsetup.File{Providers: []llmsetup.ProviderConfig{{Name: c.LLMProvider, Type: c.LLMProvider, BaseURL: c.LLMBaseURL, APIKeyEnv: c.LLMKeyEnv}}}
		file.Config = llmsetup.DefaultConfig()
		file.Tiers = map[string][]string{llmsetup.TierCheap: {c.LLMProvider + ":" + c.LLMModel}, llmsetup.TierRich: {c.LLMProvider + ":" + rich}}
		return llmsetup.Build(file, opts)
	}
	return nil, fmt.Errorf("-llm-provider %q: use scripted, openai or anthropic", c.LLMProvider)
}

func llmTiers(r *llm.Registry) string {
	var parts []string
	for _, t := range r.Tiers() {
		ts, _ := r.Targets(&llm.Request{Tier: t})
		var names []string
		for _, x := range ts {
			names = append(names, x.String())
		}
		parts = append(parts, t+"="+strings.Join(names, ","))
	}
	return strings.Join(parts, " ")
}
