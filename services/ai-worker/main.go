// Command ai-worker runs Worldgate's agent roles (ambience, npc-dialogue, quest-planner,
// world-rules): it consumes world events from stream WORLD, builds context through the
// read-only MCP servers, calls the LLM through the provider layer and publishes proposals to
// proposals.gate.<first gate>. It follows rejections of its proposals (reprompt, retry,
// fallback). Every flag has a WORLDGATE_* environment equivalent; SIGTERM drains.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/shared/admin"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/tracing"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ai-worker:", err)
		os.Exit(1)
	}
}

type flags struct {
	nats                                        natsx.ConnConfig
	admin, logLevel                             string
	llmConfig, llmProvider, llmBaseURL, llmKey  string
	llmModel, llmRichModel                      string
	worldURL, loreURL, classifyURL, mcpToken    string
	routesFile, roles                           string
	attestKeys                                  string
	budgets                                     string
	offenders                                   budget.OffenderPolicy
	toolBudget                                  int
	freshFor, ackWait, maxTask, maxSkew, maxAge time.Duration
	provisioning                                natsx.Provisioning
}

func run(args []string) error {
	var f flags
	fs := flag.NewFlagSet("ai-worker", flag.ContinueOnError)
	f.nats.Name = "ai-worker"
	f.nats.RegisterFlags(fs, "ai-worker", false)
	fs.StringVar(&f.admin, "admin", "127.0.0.1:9420", "admin listen address (/metrics, /healthz, /readyz)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.llmConfig, "llm-config", "", "YAML provider configuration (services/ai-worker/llmsetup); overrides the -llm-provider flags")
	fs.StringVar(&f.llmProvider, "llm-provider", "scripted", "scripted (offline default), openai (any OpenAI-compatible API) or anthropic")
	fs.StringVar(&f.llmBaseURL, "llm-base-url", "", "base URL of the OpenAI-compatible or Anthropic API (empty: the vendor's)")
	fs.StringVar(&f.llmKey, "llm-api-key-env", "WORLDGATE_LLM_API_KEY", "name of the environment variable holding the API key")
	fs.StringVar(&f.llmModel, "llm-model", "", "model of the cheap tier (ambience, npc_dialogue)")
	fs.StringVar(&f.llmRichModel, "llm-rich-model", "", "model of the rich tier (quest_seed); default -llm-model")
	fs.StringVar(&f.worldURL, "mcp-world-url", "http://127.0.0.1:7401/mcp", "mcp-world Streamable HTTP endpoint")
	fs.StringVar(&f.loreURL, "mcp-lore-url", "http://127.0.0.1:7402/mcp", "mcp-lore Streamable HTTP endpoint")
	fs.StringVar(&f.classifyURL, "mcp-classify-url", "http://127.0.0.1:7403/mcp", "mcp-classify Streamable HTTP endpoint")
	fs.StringVar(&f.mcpToken, "mcp-token", "", "bearer token for the MCP servers (scopes world:read, lore:read, classify:read)")
	fs.StringVar(&f.routesFile, "routes", "", "routes per proposal kind (YAML; default: the embedded routes)")
	fs.StringVar(&f.attestKeys, "attest-keys", "", "directory of the gates' public keys, <gate>.pub and <gate>.<id>.pub during a rotation (docs/attestation.md); required: a rejection is followed only when the gates' signatures show it refuses a proposal this worker sent")
	fs.StringVar(&f.roles, "roles", "", "comma-separated roles to run (default: all)")
	fs.StringVar(&f.budgets, "budgets", "", "LLM budget file (docs/budgets.md); empty: no budgets. A bad file stops start-up")
	fs.IntVar(&f.offenders.Threshold, "offender-threshold", 3, "with -budgets: this many flagged utterances of one player within -offender-window make a repeat-offender strike")
	fs.DurationVar(&f.offenders.Window, "offender-window", time.Hour, "with -budgets: how long a flagged utterance counts towards a strike")
	fs.Float64Var(&f.offenders.Multiplier, "offender-multiplier", 0.5, "with -budgets: a strike scales the player's per-actor budgets by this (strike k: its k-th power, at least 0.1)")
	fs.DurationVar(&f.offenders.CoolDown, "offender-cool-down", 2*time.Minute, "with -budgets: after a strike none of the player's calls is paid for this long (static content instead)")
	fs.DurationVar(&f.offenders.Decay, "offender-decay", 24*time.Hour, "with -budgets: a strike's tighter limits return linearly to the file's over this long")
	fs.IntVar(&f.toolBudget, "tool-budget", 6, "hard cap of MCP tool calls per task")
	fs.DurationVar(&f.freshFor, "ambience-fresh-for", 10*time.Minute, "skip ambience for a location whose ambience is younger than this (negative: never skip)")
	fs.DurationVar(&f.ackWait, "ack-wait", 10*time.Second, "how soon a crashed worker's triggers are redelivered (a live worker keeps those it works on in progress, up to -max-task)")
	fs.DurationVar(&f.maxTask, "max-task", 3*time.Minute, "how long a task may take, model retries included, before its trigger is left for redelivery")
	fs.DurationVar(&f.maxSkew, "max-clock-skew", 5*time.Minute, "refuse world events whose occurredUtc is further in the future than this")
	fs.DurationVar(&f.maxAge, "max-event-age", 24*time.Hour, "refuse world events older than this (negative: no limit)")
	f.provisioning.RegisterFlags(fs)
	tc := tracing.Config{ServiceName: "ai-worker"}
	tc.RegisterFlags(fs)
	if err := config.Parse(fs, args, config.Prefix); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	log := logx.New(os.Stderr, "ai-worker", f.logLevel)
	gctune.Apply(gctune.ShortLived, log)
	reg := metrics.NewRegistry()

	var budgets *budget.Config
	if f.budgets != "" {
		// Checked before anything starts: a bad file names its line and field.
		var err error
		if budgets, err = budget.LoadConfig(f.budgets); err != nil {
			return err
		}
	}
	routes, err := route.Load(f.routesFile)
	if err != nil {
		return err
	}
	if f.attestKeys == "" {
		return errors.New("-attest-keys is required: a rejection is followed (reprompted, retried, fallen back) only when the gates' signatures show it refuses a proposal this worker sent (docs/attestation.md)")
	}
	keyring, err := attest.LoadKeyring(f.attestKeys)
	if err != nil {
		return err
	}
	nc, js, err := natsx.Connect(f.nats, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	stopTracing, err := tracing.Setup(ctx, tc)
	if err != nil {
		return err
	}
	defer func() {
		if err := stopTracing(); err != nil {
			log.Warn("tracing: the last spans were not exported", "err", err)
		}
	}()
	if err := f.provisioning.AtStart(ctx, js, log); err != nil {
		return err
	}
	var admit llm.Admitter
	var offenders *budget.Offenders
	if budgets != nil {
		var bk budget.Buckets
		if err := natsx.Await(ctx, "budget buckets", log, func(ctx context.Context) (err error) {
			bk, err = budget.OpenBuckets(ctx, js)
			return err
		}); err != nil {
			return err
		}
		bm, err := budget.NewMetrics(reg)
		if err != nil {
			return err
		}
		ledger, err := budget.NewLedger(ctx, bk, budgets, budget.Options{Metrics: bm, Logger: log})
		if err != nil {
			return err
		}
		if err := ledger.Start(ctx); err != nil {
			return err
		}
		defer ledger.Close()
		reg.MustRegister(budget.NewCollector(bk, log))
		admit = ledger
		// Repeat offenders: the input rail's flags tighten a player's per-actor budgets.
		if offenders, err = budget.NewOffenders(bk.Control, f.offenders, reg, log, nil); err != nil {
			return err
		}
	}
	llmReg, err := buildLLM(f, reg, log, admit)
	if err != nil {
		return err
	}
	kv, err := natsx.AwaitKeyValue(ctx, js, natsx.BucketAICache, log)
	if err != nil {
		return fmt.Errorf("AI cache: %w (start with -provision or provision the topology first)", err)
	}
	mcp, err := client.New(ctx, client.Config{Logger: log, Servers: []client.ServerConfig{
		{Name: "world", URL: f.worldURL, Token: f.mcpToken},
		{Name: "lore", URL: f.loreURL, Token: f.mcpToken},
		{Name: "classify", URL: f.classifyURL, Token: f.mcpToken},
	}})
	if err != nil {
		return err
	}
	defer mcp.Close()

	app, err := runtime.New(runtime.Options{Name: "ai-worker", Description: "Worldgate agent roles", Conn: nc, JetStream: js,
		Registerer: reg, Logger: log})
	if err != nil {
		return err
	}
	var roleNames []string
	if f.roles != "" {
		for _, r := range strings.Split(f.roles, ",") {
			roleNames = append(roleNames, strings.TrimSpace(r))
		}
	}
	if err := aiworker.Register(app, aiworker.Deps{LLM: llmReg, Tools: mcp, KV: kv, Committed: js, Routes: routes, Keyring: keyring, Registerer: reg, Logger: log,
		Roles: roleNames, ToolBudget: f.toolBudget, AmbienceFreshFor: f.freshFor, AckWait: f.ackWait, MaxTask: f.maxTask,
		MaxClockSkew: f.maxSkew, MaxEventAge: f.maxAge, OnInputFlag: onFlag(offenders)}); err != nil {
		return err
	}
	reg.MustRegister(natsx.NewLagCollector(js, log, events.StreamWorld, events.StreamProposals))
	adm := admin.New(reg, log)
	adm.AddCheck("handlers", app.Ready)
	adm.AddCheck("mcp", func(context.Context) error {
		var down []string
		for _, h := range mcp.Health() {
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
	adm.AddDetail("llm", func(context.Context) any { return llmReg.Health() })
	if err := adm.Start(f.admin); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = adm.Close(cctx)
	}()
	log.Info("ai-worker started", "admin", adm.Addr(), "llm", llmTiers(llmReg), "roles", roleNames)
	return app.Run(ctx)
}

func buildLLM(f flags, reg prometheus.Registerer, log *slog.Logger, admit llm.Admitter) (*llm.Registry, error) {
	opts := llmsetup.Options{Registerer: reg, Logger: log, Admitter: admit}
	if f.llmConfig != "" {
		return llmsetup.Load(f.llmConfig, opts)
	}
	switch f.llmProvider {
	case "", "scripted":
		return llmsetup.Default(opts)
	case "openai", "anthropic":
		if f.llmModel == "" {
			return nil, fmt.Errorf("-llm-provider %s needs -llm-model", f.llmProvider)
		}
		rich := f.llmRichModel
		if rich == "" {
			rich = f.llmModel
		}
		file := llmsetup.File{Providers: []llmsetup.ProviderConfig{{Name: f.llmProvider, Type: f.llmProvider, BaseURL: f.llmBaseURL, APIKeyEnv: f.llmKey}}}
		file.Config = llmsetup.DefaultConfig()
		file.Tiers = map[string][]string{llmsetup.TierCheap: {f.llmProvider + ":" + f.llmModel}, llmsetup.TierRich: {f.llmProvider + ":" + rich}}
		return llmsetup.Build(file, opts)
	}
	return nil, fmt.Errorf("-llm-provider %q: use scripted, openai or anthropic", f.llmProvider)
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

// onFlag is the input rail's hook: the repeat-offender counter when budgets are configured.
func onFlag(o *budget.Offenders) func(context.Context, string, []string) {
	if o == nil {
		return nil
	}
	return o.OnFlag
}
