package gates

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/approval"
	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// Program is a gate process: one gate (-gate schema, NATS user gate-schema) or several. Its
// graph (read-only, for the gates that read it) is opened by Start, only when a gate needs it.
var Program = service.Program{Name: "gate", NATSUser: "gate-<name> for one gate, gates for -gate all", Admin: "127.0.0.1:9410",
	Lag: []string{events.StreamProposals}, GC: gctune.ShortLived}

// ServiceConfig is a gate process's configuration: its flags (RegisterFlags), its argv (Args)
// and environment (Env). Chain holds the gates' own settings (Config); the flags set part of
// it, the rest keeps DefaultConfig's.
type ServiceConfig struct {
	service.Process
	Gates                      string // comma-separated names or "all"
	ClassifyURL, ClassifyToken string
	SigningKeys                string // directory of the gates' signing keys
	Fuse                       bool
	Routes, Templates          string
	// RateBudgets and SafetyBlocked are Chain's Rate.Budgets and Safety.Blocked as JSON (the
	// flags' form); SetChain sets all three.
	RateBudgets, SafetyBlocked string
	Chain                      Config
	// Registry holds the gates the process may run (not a flag); nil: Builtin().
	Registry *Registry
}

// registry is the registry the process runs: c.Registry, or the built-in gates.
func (c *ServiceConfig) registry() *Registry {
	if c.Registry == nil {
		return Builtin()
	}
	return c.Registry
}

// DefaultServiceConfig is the configuration with every flag at its default.
func DefaultServiceConfig() ServiceConfig {
	return service.Defaults((*ServiceConfig).RegisterFlags)
}

// RegisterFlags registers the gate's flags on fs, each with its default.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	Program.RegisterFlags(fs, &c.Process)
	c.Graph = graphx.Settings{URL: "ws://127.0.0.1:8182/gremlin", Username: "reader", ReadOnly: true} // the invariant gate reads
	c.Graph.RegisterFlags(fs, "graph-")
	c.Chain = DefaultConfig()
	fs.StringVar(&c.Gates, "gate", "all", "gates to run: comma-separated names ("+strings.Join(c.registry().Known(), ",")+") or all")
	fs.StringVar(&c.ClassifyURL, "classify-url", "http://127.0.0.1:7403/mcp", "mcp-classify Streamable HTTP endpoint (safety gate)")
	fs.StringVar(&c.ClassifyToken, "classify-token", "", "bearer token with scope classify:read")
	fs.StringVar(&c.SigningKeys, "signing-keys", "", "directory of the gates' Ed25519 signing keys, <gate>.key (mode 0600; docs/attestation.md); required")
	fs.BoolVar(&c.Fuse, "fuse", true, "decide consecutive gates of a route that run in this process in one hop (one consume, one publish); false: every gate hops through JetStream (its NATS user must then publish to every next hop, e.g. gates-unfused)")
	fs.StringVar(&c.Routes, "routes", "", "routes file (YAML); empty: the embedded default")
	fs.StringVar(&c.Templates, "templates", "", `prompt templates file (JSON {"id@version": "sha256"}); required by the replay gate`)
	fs.IntVar(&c.Chain.MaxDeliver, "max-deliver", 5, "deliveries before an infrastructure failure is dead-lettered")
	fs.DurationVar(&c.Chain.AckWait, "ack-wait", 10*time.Second, "how soon a crashed gate process's proposals are redelivered (a live one keeps those it holds in progress); a process that starts while proposals are held elsewhere takes none for that long, keeping each actor's in order")
	fs.DurationVar(&c.Chain.Rate.Window, "rate-window", time.Minute, "rate budget window (≤ 1h)")
	fs.StringVar(&c.RateBudgets, "rate-budgets", `{"*":{"actorCount":30,"actorCostUsd":0.5,"globalCount":3000,"globalCostUsd":20}}`, `rate budgets per kind (JSON; "*" for the rest)`)
	fs.StringVar(&c.SafetyBlocked, "safety-blocked", "", `blocked moderation categories per policy version (JSON {"version": ["hate", …], "*": […]}); empty: every flagged category blocks`)
	fs.IntVar(&c.Chain.Dedup.MaxDistance, "dedup-distance", DefaultConfig().Dedup.MaxDistance, "SimHash Hamming distance at or under which texts are near-duplicates")
	fs.DurationVar(&c.Chain.Dedup.Window, "dedup-window", time.Hour, "how long accepted fingerprints count")
	fs.DurationVar(&c.Chain.Approval.Expiry, "approval-expiry", 0, "held proposals expire after this long (0: never)")
	fs.DurationVar(&c.Chain.Invariant.ReferenceWait, "invariant-reference-wait", 3*time.Second, "how long world-building proposals wait for referenced entities of their batch")
}

// SetChain sets the gates' settings, -rate-budgets and -safety-blocked included: what an
// in-process caller (the stack) configures, rendered as the flags a process reads.
func (c *ServiceConfig) SetChain(chain Config) {
	c.Chain = chain
	c.RateBudgets, c.SafetyBlocked = jsonOf(chain.Rate.Budgets), jsonOf(chain.Safety.Blocked)
}

// jsonOf is a map as JSON, "" when it is empty.
func jsonOf[M ~map[string]V, V any](m M) string {
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// chain is the gates' settings with -rate-budgets and -safety-blocked parsed into them.
func (c *ServiceConfig) chain() (Config, error) {
	chain := c.Chain
	chain.NoFusion = chain.NoFusion || !c.Fuse
	chain.Rate.Budgets = nil
	if err := json.Unmarshal([]byte(c.RateBudgets), &chain.Rate.Budgets); err != nil {
		return Config{}, fmt.Errorf("-rate-budgets is not valid JSON: %w", err)
	}
	chain.Safety.Blocked = nil
	if c.SafetyBlocked != "" {
		if err := json.Unmarshal([]byte(c.SafetyBlocked), &chain.Safety.Blocked); err != nil {
			return Config{}, fmt.Errorf("-safety-blocked is not valid JSON: %w", err)
		}
	}
	return chain, nil
}

// Proc is the process part of the configuration (service.Config).
func (c *ServiceConfig) Proc() *service.Process { return &c.Process }

// Check reports a configuration no gate can start with.
func (c *ServiceConfig) Check() error {
	if c.SigningKeys == "" {
		return errors.New("-signing-keys is required: every gate signs its decisions with its own key (docs/attestation.md)")
	}
	if _, err := c.registry().Names(strings.Split(c.Gates, ",")); err != nil {
		return err
	}
	_, err := c.chain()
	return err
}

// Args is the argv of a gate process with this configuration.
func (c ServiceConfig) Args() []string {
	return service.Args(DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Env is the same configuration as environment variables.
func (c ServiceConfig) Env() []string {
	return service.Env(Program, DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Start runs the gates c names (of c.Registry, or the built-in ones) on in, as one runtime app: it loads their signing keys and
// routes, connects what they need (mcp-classify through in.MCP or -classify-url, the graph as
// in.Graph or -graph-*, the templates file), registers them and returns what runs them (and
// the approval expiry sweep, with an expiry).
func Start(ctx context.Context, in service.Infra, c ServiceConfig) (_ service.Run, err error) {
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
	reg := c.registry()
	names, err := reg.Names(strings.Split(c.Gates, ","))
	if err != nil {
		return nil, err
	}
	routes, err := route.Load(c.Routes, reg.Known()...)
	if err != nil {
		return nil, err
	}
	chain, err := c.chain()
	if err != nil {
		return nil, err
	}
	signers, err := attest.LoadSigners(c.SigningKeys, names)
	if err != nil {
		return nil, err
	}
	deps := Deps{JetStream: in.JetStream, Routes: &routes, Signers: signers, Config: chain, Registerer: in.Registerer, Logger: in.Logger}
	if len(reg.Needing(names, NeedClassifier)) > 0 {
		var mc *client.Client
		if in.MCP != nil {
			mc, err = in.MCP(ctx, "classify")
		} else {
			mc, err = client.New(ctx, client.Config{Servers: []client.ServerConfig{{Name: "classify", URL: c.ClassifyURL, Token: c.ClassifyToken}},
				AllowList: []string{ModerateTool}, Logger: in.Logger})
			if err == nil {
				closers = append(closers, func() { _ = mc.Close() })
			}
		}
		if err != nil {
			return nil, err
		}
		deps.Classify = mc
		in.Admin.AddCheck("classify", func(context.Context) error {
			for _, h := range mc.Health() {
				if !h.Available {
					return fmt.Errorf("mcp-classify unavailable: %s", h.LastError)
				}
			}
			return nil
		})
	}
	if who := reg.Needing(names, NeedGraphReader); len(who) > 0 {
		g := in.Graph
		if g == nil {
			if g, err = graphx.Open(c.Graph); err != nil {
				return nil, fmt.Errorf("gates %s need the graph: %w", strings.Join(who, ", "), err)
			}
			closers = append(closers, g.Close)
		}
		deps.Graph = g
		in.Admin.AddCheck("graph", g.Ping)
	}
	if who := reg.Needing(names, NeedTemplates); len(who) > 0 {
		if c.Templates == "" {
			return nil, fmt.Errorf("gates %s need -templates: a JSON file mapping \"id@version\" to each prompt template's sha256", strings.Join(who, ", "))
		}
		data, err := os.ReadFile(c.Templates)
		if err != nil {
			return nil, err
		}
		var tm TemplateMap
		if err := json.Unmarshal(data, &tm); err != nil {
			return nil, fmt.Errorf("templates file %s: %w", c.Templates, err)
		}
		deps.Templates = tm
	}
	app, err := runtime.New(runtime.Options{Name: "gate", Description: "Worldgate proposal gates: " + strings.Join(names, ", "),
		Conn: in.Conn, JetStream: in.JetStream, Registerer: in.Registerer, Logger: in.Logger})
	if err != nil {
		return nil, err
	}
	if err := reg.Register(ctx, app, deps, names); err != nil {
		return nil, err
	}
	in.Admin.AddCheck("handlers", app.Ready)
	in.Logger.Info("gates registered", "gates", names, "fused", !chain.NoFusion && len(names) > 1)
	sweep := chain.Approval.Expiry > 0 && slices.Contains(names, Approval)
	return func(ctx context.Context) error {
		defer func() {
			for _, f := range closers {
				f()
			}
		}()
		if sweep {
			go sweepExpired(ctx, in.JetStream, in.Logger)
		}
		return app.Run(ctx)
	}, nil
}

// sweepExpired expires held proposals past their deadline, once a minute. Every replica may
// sweep: a decision is a compare-and-set, so each proposal expires once.
func sweepExpired(ctx context.Context, js jetstream.JetStream, log *slog.Logger) {
	var store *approval.Store
	if err := natsx.Await(ctx, "approvals bucket (expiry sweep)", log, func(ctx context.Context) (err error) {
		store, err = approval.Open(ctx, js)
		return err
	}); err != nil {
		log.Error("approval expiry disabled", "err", err)
		return
	}
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := store.ExpireDue(ctx); err != nil {
				log.Warn("approval expiry sweep failed; will retry", "err", err)
			} else if n > 0 {
				log.Info("held proposals expired", "count", n)
			}
		}
	}
}
