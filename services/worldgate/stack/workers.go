package stack

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
	"github.com/worldgate/worldgate/shared/admin"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/runtime"
)

// The workers' parts.
var (
	// Processor is the event-processor, the only graph writer, and its marker pruner.
	Processor = Part{processor.Name, startProcessor}
	// MemoryWriter keeps the interaction memory (get-recent-dialogue) from COMMITTED.
	MemoryWriter = Part{memory.Name, startMemoryWriter}
	// Gates runs each gate as its own worker on its own NATS user (gates.OneProcessPerGate).
	Gates = Part{"gates", startGates}
	// AIWorker is the ai-worker on the LLMConfig provider (default: scripted), under Budgets.
	AIWorker = Part{"ai-worker", startAIWorker}
)

// NewApp builds one worker's runtime app on the stack's metrics registry, connected to NATS as
// its role's user (shared/natsx/natsauth), so dev runs under the production permissions.
func (st *Stack) NewApp(name, role, description string) (*runtime.App, jetstream.JetStream, error) {
	nc, js, err := st.ConnectAs(role)
	if err != nil {
		return nil, nil, err
	}
	app, err := runtime.New(runtime.Options{Name: name, Description: description, Conn: nc, JetStream: js,
		Registerer: st.Reg, Logger: st.Log.With("worker", name)})
	if err != nil {
		return nil, nil, err
	}
	st.Admin.AddCheck(name, app.Ready)
	return app, js, nil
}

// startMemoryWriter runs the memory-writer as its process does (memory.Start), on its own
// NATS user: it reads COMMITTED and writes only the memory bucket.
func startMemoryWriter(ctx context.Context, st *Stack) error {
	in, err := st.Infra(memory.Name, natsauth.MemoryWriter)
	if err != nil {
		return err
	}
	run, err := memory.Start(ctx, in, memory.DefaultConfig())
	if err != nil {
		return err
	}
	st.Go(memory.Name, run)
	return nil
}

// Infra is the infrastructure of the service name in the stack: its role's NATS user, the
// stack's metrics registry and admin server (its "handlers" readiness check named after it).
// The caller adds the graph connection the service needs (OpenGraph).
func (st *Stack) Infra(name, role string) (service.Infra, error) {
	nc, js, err := st.ConnectAs(role)
	if err != nil {
		return service.Infra{}, err
	}
	return service.Infra{Conn: nc, JetStream: js, Registerer: st.Reg, Logger: st.Log.With("worker", name),
		Admin: serviceAdmin{st.Admin, name}}, nil
}

// serviceAdmin is the stack's admin server as one service sees it: the checks of several
// services share it, so each one's "handlers" check is named after its service.
type serviceAdmin struct {
	*admin.Server
	name string
}

func (a serviceAdmin) AddCheck(name string, c admin.Check) {
	if name == "handlers" {
		name = a.name
	}
	a.Server.AddCheck(name, c)
}

// startProcessor runs the event-processor as its process does (processor.Start), with the
// gates' keys of <data-dir>/keys.
func startProcessor(ctx context.Context, st *Stack) error {
	in, err := st.Infra(processor.Name, natsauth.EventProcessor)
	if err != nil {
		return err
	}
	// The processor is the only component given the graph's write credentials.
	if in.Graph, err = st.OpenGraph(GraphWriter); err != nil {
		return err
	}
	if _, _, err := st.GateKeys(); err != nil { // generated on the first start
		return err
	}
	cfg := processor.DefaultConfig()
	cfg.AttestKeys = st.KeysDir()
	if st.ProcessorInFlight > 0 {
		cfg.MaxInFlight = st.ProcessorInFlight
	}
	run, err := processor.Start(ctx, in, cfg)
	if err != nil {
		return err
	}
	st.Go(processor.Name, run)
	return nil
}

// MCPClient is a client of the named MCP servers (MCP must have started): in process where the
// stack runs the server (MCPServers), else over HTTP with the stack's read token; it closes
// when the stack stops.
func (st *Stack) MCPClient(ctx context.Context, servers ...string) (*client.Client, error) {
	cfg := client.Config{Logger: st.Log.With("component", "mcp-client")}
	for _, name := range servers {
		sc := client.ServerConfig{Name: name, URL: st.MCPURLs[name], Token: st.MCPToken}
		if s := st.MCPServers[name]; s != nil {
			sc = client.ServerConfig{Name: name, InProcess: s}
		}
		cfg.Servers = append(cfg.Servers, sc)
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st.OnStop(func() { _ = c.Close() })
	return c, nil
}

// GateKeys are the gates' signing keys and the keyring that accepts them, kept in
// <data-dir>/keys (generated on first start; docs/attestation.md).
func (st *Stack) GateKeys() (map[string]*attest.Signer, *attest.Keyring, error) {
	return attest.Ensure(st.KeysDir(), gates.Known())
}

// KeysDir is where the gates' keys are kept: <data-dir>/keys.
func (st *Stack) KeysDir() string { return filepath.Join(st.DataDir, "keys") }

// startGates runs each gate as its own process does (gates.Start), each on its own NATS user
// (gate-<name>) with its own signing key: a gate can publish only to its next hops and write
// only its own retry tickets, and sign only its own decisions. They call mcp-classify in
// process and read the graph as the MCP part's reader; the replay gate checks template hashes
// against <data-dir>/templates.json, written from the ai-worker's registry.
func startGates(ctx context.Context, st *Stack) error {
	if _, _, err := st.GateKeys(); err != nil { // generated on the first start
		return err
	}
	tmpl := filepath.Join(st.DataDir, "templates.json")
	if err := templates.WriteHashes(tmpl); err != nil {
		return err
	}
	chain := gates.DefaultConfig()
	if st.Config.Gates != nil {
		chain = *st.Config.Gates
	}
	// Production's layout: each gate its own process, NATS user and signing key.
	for _, proc := range gates.OneProcessPerGate() {
		name := proc.User()
		in, err := st.Infra(name, name)
		if err != nil {
			return err
		}
		in.Graph, in.MCP = st.GraphRO, st.MCPClient
		cfg := gates.DefaultServiceConfig()
		cfg.Gates, cfg.SigningKeys, cfg.Templates = strings.Join(proc.Gates, ","), st.KeysDir(), tmpl
		cfg.SetChain(chain)
		run, err := gates.Start(ctx, in, cfg)
		if err != nil {
			return err
		}
		st.Go(name, run)
	}
	return nil
}

func startAIWorker(ctx context.Context, st *Stack) error {
	opts := llmsetup.Options{Registerer: st.Reg, Logger: st.Log.With("component", "llm")}
	ledger, err := st.startBudgets(ctx)
	if err != nil {
		return err
	}
	if ledger != nil {
		opts.Admitter = ledger
	}
	provider, err := llmsetup.Default(opts)
	if st.LLMConfig != "" {
		provider, err = llmsetup.Load(st.LLMConfig, opts)
	}
	if err != nil {
		return err
	}
	tools, err := st.MCPClient(ctx, "world", "lore", "classify")
	if err != nil {
		return err
	}
	app, js, err := st.NewApp("ai-worker", natsauth.AIWorker, "agent roles: ambience, npc-dialogue, quest-planner, world-rules")
	if err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, natsx.BucketAICache)
	if err != nil {
		return err
	}
	st.Admin.AddDetail("llm", func(context.Context) any { return provider.Health() })
	// The gates' public keys: the ai-worker follows only rejections whose trail they verify.
	_, ring, err := st.GateKeys()
	if err != nil {
		return err
	}
	deps := aiworker.Deps{LLM: provider, Tools: tools, KV: kv, Committed: js, Keyring: ring, Registerer: st.Reg, Logger: st.Log.With("worker", "ai-worker")}
	if st.Offenders != nil {
		deps.OnInputFlag = st.Offenders.OnFlag // repeat offenders get tighter per-player budgets
	}
	if err := aiworker.Register(app, deps); err != nil {
		return err
	}
	st.Go("ai-worker", app.Run)
	return nil
}

// startBudgets starts the ai-worker's budget ledger on the Budgets file (default:
// DefaultBudgets), as the ai-worker user, with its metrics on the stack's registry.
func (st *Stack) startBudgets(ctx context.Context) (*budget.Ledger, error) {
	var cfg *budget.Config
	var err error
	switch st.Budgets {
	case "none":
		return nil, nil
	case "":
		if cfg, err = budget.ParseConfig(st.DefaultBudgets); err != nil {
			return nil, fmt.Errorf("default budgets: %w", err)
		}
	default:
		// A bad file stops start-up with its line and field, as the ai-worker's -budgets does.
		if cfg, err = budget.LoadConfig(st.Budgets); err != nil {
			return nil, err
		}
	}
	_, js, err := st.ConnectAs(natsauth.AIWorker)
	if err != nil {
		return nil, err
	}
	b, err := budget.OpenBuckets(ctx, js)
	if err != nil {
		return nil, err
	}
	m, err := budget.NewMetrics(st.Reg)
	if err != nil {
		return nil, err
	}
	log := st.Log.With("component", "budget")
	l, err := budget.NewLedger(ctx, b, cfg, budget.Options{Metrics: m, Logger: log})
	if err != nil {
		return nil, err
	}
	if err := l.Start(st.WorkersCtx); err != nil {
		return nil, err
	}
	st.OnStop(l.Close)
	st.Reg.MustRegister(budget.NewCollector(b, log))
	if st.Offenders, err = budget.NewOffenders(b.Control, budget.OffenderPolicy{}, st.Reg, log, nil); err != nil {
		return nil, err
	}
	st.Ledger = l
	return l, nil
}
