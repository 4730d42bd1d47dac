package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/gate/attest"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/gate/route"
	"github.com/worldgate/worldgate/services/worldgate/worldfile"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/tracing"
)

func init() {
	parts = append(parts,
		part{"event-processor", startProcessor},
		part{"gates", startGates},
		part{"ai-worker", startAIWorker},
		part{"demo world", loadDemoWorldOnce},
	)
}

// newApp builds one worker's runtime app on the stack's metrics registry, connected to NATS as
// its role's user (shared/natsx/natsauth), so dev runs under the production permissions.
func (st *stack) newApp(name, role, description string) (*runtime.App, jetstream.JetStream, error) {
	nc, js, err := st.connectAs(role)
	if err != nil {
		return nil, nil, err
	}
	app, err := runtime.New(runtime.Options{Name: name, Description: description, Conn: nc, JetStream: js,
		Registerer: st.reg, Logger: st.log.With("worker", name)})
	if err != nil {
		return nil, nil, err
	}
	st.admin.AddCheck(name, app.Ready)
	return app, js, nil
}

func startProcessor(_ context.Context, st *stack) error {
	// The processor is the only component given the graph's write credentials.
	conn, err := graphx.Open(graphx.Settings{URL: st.graph.URL(), Username: devGraphWriter, Password: devGraphWriterPassword})
	if err != nil {
		return err
	}
	st.onStop(conn.Close)
	app, _, err := st.newApp("event-processor", natsauth.EventProcessor, "applies validated proposals to the graph, exactly once")
	if err != nil {
		return err
	}
	_, ring, err := st.gateKeys()
	if err != nil {
		return err
	}
	if _, err := processor.Register(app, processor.Deps{Graph: conn, Keyring: ring, Registerer: st.reg, Logger: st.log.With("worker", "event-processor")}); err != nil {
		return err
	}
	st.admin.AddCheck("graph", conn.Ping)
	st.goRun("event-processor", app.Run)
	// Apply-once markers past the default horizon (72h) are pruned, as in production.
	pruner, err := processor.NewPruner(conn, processor.PruneConfig{}, st.reg, st.log.With("worker", "marker-pruner"))
	if err != nil {
		return err
	}
	st.goRun("marker-pruner", func(ctx context.Context) error { pruner.Run(ctx); return nil })
	return nil
}

func (st *stack) mcpClient(ctx context.Context, servers ...string) (*client.Client, error) {
	cfg := client.Config{Logger: st.log.With("component", "mcp-client")}
	for _, name := range servers {
		cfg.Servers = append(cfg.Servers, client.ServerConfig{Name: name, URL: st.mcpURLs[name], Token: st.mcpToken})
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st.onStop(func() { _ = c.Close() })
	return c, nil
}

// templateLookup lets the replay gate check template hashes against the ai-worker's registry.
type templateLookup struct{}

func (templateLookup) Lookup(id, version string) (string, bool) {
	t, ok := templates.Registry().GetVersion(id, version)
	if !ok {
		return "", false
	}
	return t.SHA256, true
}

// gateKeys are the gates' signing keys and the keyring that accepts them, kept in
// <data-dir>/keys (generated on first start; docs/attestation.md).
func (st *stack) gateKeys() (map[string]*attest.Signer, *attest.Keyring, error) {
	return attest.Ensure(filepath.Join(st.f.dataDir, "keys"), gates.Known())
}

// startGates runs each gate as its own worker on its own NATS user (gate-<name>), with its own
// signing key: a gate can publish only to its next hops and write only its own retry tickets,
// and sign only its own decisions.
func startGates(ctx context.Context, st *stack) error {
	classify, err := st.mcpClient(ctx, "classify")
	if err != nil {
		return err
	}
	signers, _, err := st.gateKeys()
	if err != nil {
		return err
	}
	// The demo's chattiest player should meet the rate gate, so dev uses short windows and a
	// small per-player dialogue budget; production budgets come from the gate service's flags.
	cfg := gates.DefaultConfig()
	cfg.Rate.Window = 10 * time.Second
	cfg.Rate.Budgets[events.KindNPCDialogue] = gates.Budget{ActorCount: 4, ActorCostUSD: 0.05, GlobalCount: 600, GlobalCostUSD: 5}
	// Production's layout: each gate its own process, NATS user and signing key.
	for _, proc := range gates.OneProcessPerGate() {
		name := proc.User()
		nc, js, err := st.connectAs(name)
		if err != nil {
			return err
		}
		app, err := runtime.New(runtime.Options{Name: "gate", Description: "gates " + strings.Join(proc.Gates, ", "), Conn: nc, JetStream: js,
			Registerer: st.reg, Logger: st.log.With("worker", name)})
		if err != nil {
			return err
		}
		st.admin.AddCheck(name, app.Ready)
		err = gates.Register(app, gates.Deps{
			JetStream: js, Classify: classify, Graph: st.graphRO, Templates: templateLookup{}, Config: cfg,
			Signers: signers, Registerer: st.reg, Logger: st.log.With("worker", name),
		}, proc.Gates)
		if err != nil {
			return err
		}
		st.goRun(name, app.Run)
	}
	return nil
}

func startAIWorker(ctx context.Context, st *stack) error {
	opts := llmsetup.Options{Registerer: st.reg, Logger: st.log.With("component", "llm")}
	ledger, err := st.startBudgets(ctx)
	if err != nil {
		return err
	}
	if ledger != nil {
		opts.Admitter = ledger
	}
	provider, err := llmsetup.Default(opts)
	if st.f.llmConfig != "" {
		provider, err = llmsetup.Load(st.f.llmConfig, opts)
	}
	if err != nil {
		return err
	}
	tools, err := st.mcpClient(ctx, "world", "lore", "classify")
	if err != nil {
		return err
	}
	app, js, err := st.newApp("ai-worker", natsauth.AIWorker, "agent roles: ambience, npc-dialogue, quest-planner, world-rules")
	if err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, natsx.BucketAICache)
	if err != nil {
		return err
	}
	st.admin.AddDetail("llm", func(context.Context) any { return provider.Health() })
	deps := aiworker.Deps{LLM: provider, Tools: tools, KV: kv, Registerer: st.reg, Logger: st.log.With("worker", "ai-worker")}
	if st.offenders != nil {
		deps.OnInputFlag = st.offenders.OnFlag // repeat offenders get tighter per-player budgets
	}
	if err := aiworker.Register(app, deps); err != nil {
		return err
	}
	st.goRun("ai-worker", app.Run)
	return nil
}

// loadDemoWorldOnce sends the demo world through the pipeline the first time a data directory
// is used, and waits until it is committed so the demo's events find their world.
func loadDemoWorldOnce(ctx context.Context, st *stack) error {
	marker := filepath.Join(st.f.dataDir, "demo-world.loaded")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	w, err := worldfile.DemoWorld()
	if err != nil {
		return err
	}
	_, js, err := st.connectAs(natsauth.Operator) // as `worldgate world load` would
	if err != nil {
		return err
	}
	n, err := publishWorld(ctx, js, w)
	if err != nil {
		return err
	}
	st.log.Info("demo world sent through the pipeline", "proposals", n)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := st.waitIdle(wctx); err != nil {
		return fmt.Errorf("loading the demo world: %w", err)
	}
	// The lore index reloads every few seconds; the demo should not start before it has the
	// world's lore.
	if err := st.lore.Refresh(wctx); err != nil {
		return fmt.Errorf("indexing the demo world's lore: %w", err)
	}
	return os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
}

// publishWorld turns a world into proposals and publishes each on the emitter subject of the
// connection's user (world-loader, else operator), with its deterministic proposal id as
// message id.
func publishWorld(ctx context.Context, js jetstream.JetStream, w *worldfile.World) (int, error) {
	emitter := events.EmitterOperator
	if nc := js.Conn(); nc != nil && nc.Opts.User == natsauth.WorldLoader {
		emitter = events.EmitterWorldLoader
	}
	subject := events.EmitSubject(emitter)
	routes := route.Default()
	proposals, err := worldfile.Proposals(w, routes.For)
	if err != nil {
		return 0, err
	}
	for i := range proposals {
		p := &proposals[i]
		data, err := json.Marshal(p)
		if err != nil {
			return i, err
		}
		msg := runtime.NewMessage(subject, p.ProposalID+"@submit", data)
		msg.Metadata.Set(events.HeaderCorrelationID, p.CorrelationID)
		msg.Metadata.Set(events.HeaderType, p.Kind)
		_, span := tracing.StartPublish(ctx, subject, p.CorrelationID, tracing.MetadataCarrier(msg.Metadata))
		err = runtime.NewPublisher(js, 0).PublishContext(ctx, "", msg)
		tracing.EndSpan(span, err)
		if err != nil {
			return i, err
		}
	}
	return len(proposals), nil
}

// devBudgets is worldgate dev's embedded budget file (docs/budgets.md).
//
//go:embed demo/budgets.yaml
var devBudgets []byte

// startBudgets starts the ai-worker's budget ledger on the -budgets file (default: the
// embedded dev budgets), as the ai-worker user, with its metrics on the stack's registry.
func (st *stack) startBudgets(ctx context.Context) (*budget.Ledger, error) {
	var cfg *budget.Config
	var err error
	switch st.f.budgets {
	case "none":
		return nil, nil
	case "":
		if cfg, err = budget.ParseConfig(devBudgets); err != nil {
			return nil, fmt.Errorf("embedded dev budgets: %w", err)
		}
	default:
		// A bad file stops start-up with its line and field, as the ai-worker's -budgets does.
		if cfg, err = budget.LoadConfig(st.f.budgets); err != nil {
			return nil, err
		}
	}
	_, js, err := st.connectAs(natsauth.AIWorker)
	if err != nil {
		return nil, err
	}
	b, err := budget.OpenBuckets(ctx, js)
	if err != nil {
		return nil, err
	}
	m, err := budget.NewMetrics(st.reg)
	if err != nil {
		return nil, err
	}
	log := st.log.With("component", "budget")
	l, err := budget.NewLedger(ctx, b, cfg, budget.Options{Metrics: m, Logger: log})
	if err != nil {
		return nil, err
	}
	if err := l.Start(st.workersCtx); err != nil {
		return nil, err
	}
	st.onStop(l.Close)
	st.reg.MustRegister(budget.NewCollector(b, log))
	if st.offenders, err = budget.NewOffenders(b.Control, budget.OffenderPolicy{}, st.reg, log, nil); err != nil {
		return nil, err
	}
	st.ledger = l
	return l, nil
}
