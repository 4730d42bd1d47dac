package stack

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
	"github.com/worldgate/worldgate/shared/admin"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
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
// services share it, so each one's "handlers" check is named after its service, and its
// "nats" check (its own connection) "<service> nats" beside the stack's.
type serviceAdmin struct {
	*admin.Server
	name string
}

func (a serviceAdmin) AddCheck(name string, c admin.Check) {
	switch name {
	case "handlers":
		name = a.name
	case "nats":
		name = a.name + " nats"
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
	return attest.Ensure(st.KeysDir(), gates.Builtin().Known())
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
	for _, proc := range gates.Builtin().OneProcessPerGate() {
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

// startAIWorker runs the ai-worker as its process does (aiworker.Start), calling the MCP
// servers in process, on the LLMConfig provider (default: scripted), under Budgets.
func startAIWorker(ctx context.Context, st *Stack) error {
	in, err := st.Infra("ai-worker", natsauth.AIWorker)
	if err != nil {
		return err
	}
	in.MCP = st.MCPClient
	if _, _, err := st.GateKeys(); err != nil { // generated on the first start
		return err
	}
	cfg := aiworker.DefaultServiceConfig()
	cfg.AttestKeys, cfg.LLMConfig = st.KeysDir(), st.LLMConfig
	if cfg.Budgets, err = st.budgetsFile(); err != nil {
		return err
	}
	s, err := aiworker.Start(ctx, in, cfg)
	if err != nil {
		return err
	}
	st.Ledger, st.Offenders = s.Ledger, s.Offenders
	st.Go("ai-worker", s.Run)
	return nil
}

// budgetsFile is the ai-worker's -budgets: none with Budgets "none", the Budgets file, or by
// default DefaultBudgets, written to <data-dir>/budgets.yaml.
func (st *Stack) budgetsFile() (string, error) {
	switch st.Budgets {
	case "none":
		return "", nil
	case "":
		path := filepath.Join(st.DataDir, "budgets.yaml")
		return path, os.WriteFile(path, st.DefaultBudgets, 0o600)
	default:
		return st.Budgets, nil
	}
}
