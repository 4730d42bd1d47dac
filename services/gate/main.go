// Command gate runs Worldgate's proposal gates: one per process (-gate schema) or several
// (-gate schema,safety or -gate all). Replicas of a gate share its durable consumer.
//
//	gate -gate all -nats-url nats://127.0.0.1:4222 -graph-url ws://127.0.0.1:8182/gremlin \
//	     -classify-url http://127.0.0.1:7403/mcp -classify-token "$TOKEN" -templates templates.json
//
// Every flag has a WORLDGATE_* environment equivalent (-nats-url → WORLDGATE_NATS_URL).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/approval"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/admin"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/tracing"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gate:", err)
		os.Exit(1)
	}
}

type flags struct {
	gates                                                     string
	nats                                                      natsx.ConnConfig
	graph                                                     graphx.Settings
	classifyURL, classifyToken                                string
	routes, templates, admin, logLevel                        string
	signingKeys                                               string
	tracing                                                   tracing.Config
	budgets, blocked                                          string
	maxDeliver, dedupDistance                                 int
	provisioning                                              natsx.Provisioning
	rateWindow, dedupWindow, approvalExpiry, refWait, ackWait time.Duration
	fuse                                                      bool
}

func parse(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	fs.StringVar(&f.gates, "gate", "all", "gates to run: comma-separated names ("+strings.Join(gates.Known(), ",")+") or all")
	f.nats.RegisterFlags(fs, "gate-<name> for one gate, gates for -gate all", false)
	f.provisioning.RegisterFlags(fs)
	f.graph = graphx.Settings{URL: "ws://127.0.0.1:8182/gremlin", Username: "reader", ReadOnly: true} // the invariant gate reads
	f.graph.RegisterFlags(fs, "graph-")
	fs.StringVar(&f.classifyURL, "classify-url", "http://127.0.0.1:7403/mcp", "mcp-classify Streamable HTTP endpoint (safety gate)")
	fs.StringVar(&f.classifyToken, "classify-token", "", "bearer token with scope classify:read")
	fs.StringVar(&f.signingKeys, "signing-keys", "", "directory of the gates' Ed25519 signing keys, <gate>.key (mode 0600; docs/attestation.md); required")
	fs.BoolVar(&f.fuse, "fuse", true, "decide consecutive gates of a route that run in this process in one hop (one consume, one publish); false: every gate hops through JetStream (its NATS user must then publish to every next hop, e.g. gates-unfused)")
	fs.StringVar(&f.routes, "routes", "", "routes file (YAML); empty: the embedded default")
	fs.StringVar(&f.templates, "templates", "", `prompt templates file (JSON {"id@version": "sha256"}); required by the replay gate`)
	fs.StringVar(&f.admin, "admin", "127.0.0.1:9410", "admin address (/metrics, /healthz, /readyz)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.IntVar(&f.maxDeliver, "max-deliver", 5, "deliveries before an infrastructure failure is dead-lettered")
	fs.DurationVar(&f.ackWait, "ack-wait", 10*time.Second, "how soon a crashed gate process's proposals are redelivered (a live one keeps those it holds in progress); a process that starts while proposals are held elsewhere takes none for that long, keeping each actor's in order")
	fs.DurationVar(&f.rateWindow, "rate-window", time.Minute, "rate budget window (≤ 1h)")
	fs.StringVar(&f.budgets, "rate-budgets", `{"*":{"actorCount":30,"actorCostUsd":0.5,"globalCount":3000,"globalCostUsd":20}}`, `rate budgets per kind (JSON; "*" for the rest)`)
	fs.StringVar(&f.blocked, "safety-blocked", "", `blocked moderation categories per policy version (JSON {"version": ["hate", …], "*": […]}); empty: every flagged category blocks`)
	fs.IntVar(&f.dedupDistance, "dedup-distance", gates.DefaultConfig().Dedup.MaxDistance, "SimHash Hamming distance at or under which texts are near-duplicates")
	fs.DurationVar(&f.dedupWindow, "dedup-window", time.Hour, "how long accepted fingerprints count")
	fs.DurationVar(&f.approvalExpiry, "approval-expiry", 0, "held proposals expire after this long (0: never)")
	fs.DurationVar(&f.refWait, "invariant-reference-wait", 3*time.Second, "how long world-building proposals wait for referenced entities of their batch")
	f.tracing.ServiceName = "gate"
	f.tracing.RegisterFlags(fs)
	err := config.Parse(fs, args, config.Prefix)
	return f, err
}

func run(args []string) error {
	f, err := parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	log := logx.New(os.Stderr, "gate", f.logLevel)
	gctune.Apply(gctune.ShortLived, log)
	names, err := gates.Names(strings.Split(f.gates, ","))
	if err != nil {
		return err
	}
	routes, err := route.Load(f.routes, gates.Known()...)
	if err != nil {
		return err
	}
	cfg := gates.Config{MaxDeliver: f.maxDeliver, AckWait: f.ackWait,
		Invariant: gates.InvariantConfig{ReferenceWait: f.refWait},
		Dedup:     gates.DedupConfig{MaxDistance: f.dedupDistance, Window: f.dedupWindow},
		Rate:      gates.RateConfig{Window: f.rateWindow},
		Approval:  gates.ApprovalConfig{Expiry: f.approvalExpiry}, NoFusion: !f.fuse}
	if err := json.Unmarshal([]byte(f.budgets), &cfg.Rate.Budgets); err != nil {
		return fmt.Errorf("-rate-budgets is not valid JSON: %w", err)
	}
	if f.blocked != "" {
		if err := json.Unmarshal([]byte(f.blocked), &cfg.Safety.Blocked); err != nil {
			return fmt.Errorf("-safety-blocked is not valid JSON: %w", err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	stopTracing, err := tracing.Setup(ctx, f.tracing)
	if err != nil {
		return err
	}
	defer func() {
		if err := stopTracing(); err != nil {
			log.Warn("tracing: the last spans were not exported", "err", err)
		}
	}()
	nc, js, err := natsx.Connect(withName(f.nats, "gate"), log)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := f.provisioning.AtStart(ctx, js, log); err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	reg.MustRegister(natsx.NewLagCollector(js, log, events.StreamProposals))
	adm := admin.New(reg, log)
	if f.signingKeys == "" {
		return errors.New("-signing-keys is required: every gate signs its decisions with its own key (docs/attestation.md)")
	}
	signers, err := attest.LoadSigners(f.signingKeys, names)
	if err != nil {
		return err
	}
	deps := gates.Deps{JetStream: js, Routes: &routes, Signers: signers, Config: cfg, Registerer: reg, Logger: log}
	if len(gates.Needing(names, gates.NeedClassifier)) > 0 {
		mc, err := client.New(ctx, client.Config{Servers: []client.ServerConfig{{Name: "classify", URL: f.classifyURL, Token: f.classifyToken}},
			AllowList: []string{gates.ModerateTool}, Logger: log})
		if err != nil {
			return err
		}
		defer mc.Close()
		deps.Classify = mc
		adm.AddCheck("classify", func(context.Context) error {
			for _, h := range mc.Health() {
				if !h.Available {
					return fmt.Errorf("mcp-classify unavailable: %s", h.LastError)
				}
			}
			return nil
		})
	}
	if who := gates.Needing(names, gates.NeedGraphReader); len(who) > 0 {
		g, err := graphx.Open(f.graph)
		if err != nil {
			return fmt.Errorf("gates %s need the graph: %w", strings.Join(who, ", "), err)
		}
		defer g.Close()
		deps.Graph = g
		adm.AddCheck("graph", g.Ping)
	}
	if who := gates.Needing(names, gates.NeedTemplates); len(who) > 0 {
		if f.templates == "" {
			return fmt.Errorf("gates %s need -templates: a JSON file mapping \"id@version\" to each prompt template's sha256", strings.Join(who, ", "))
		}
		data, err := os.ReadFile(f.templates)
		if err != nil {
			return err
		}
		var tm gates.TemplateMap
		if err := json.Unmarshal(data, &tm); err != nil {
			return fmt.Errorf("templates file %s: %w", f.templates, err)
		}
		deps.Templates = tm
	}
	app, err := runtime.New(runtime.Options{Name: "gate", Description: "Worldgate proposal gates: " + strings.Join(names, ", "),
		Conn: nc, JetStream: js, Registerer: reg, Logger: log})
	if err != nil {
		return err
	}
	if err := gates.Register(app, deps, names); err != nil {
		return err
	}
	adm.AddCheck("handlers", app.Ready)
	if err := adm.Start(f.admin); err != nil {
		return fmt.Errorf("admin endpoint %s: %w", f.admin, err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = adm.Close(sctx)
	}()
	if f.approvalExpiry > 0 && slices.Contains(names, gates.Approval) {
		go sweepExpired(ctx, js, log)
	}
	log.Info("gate starting", "gates", names, "fused", f.fuse && len(names) > 1, "admin", adm.Addr())
	return app.Run(ctx)
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

func withName(c natsx.ConnConfig, name string) natsx.ConnConfig { c.Name = name; return c }
