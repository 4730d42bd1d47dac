// Package harness is what the load, soak and chaos programs share: the pipeline started in
// one process or as one process per worker, the synthetic world and its events, a tracker that
// reads every outcome back from the streams, and process figures (CPU, RSS).
//
// It drives the real services (the same packages `worldgate dev` wires) and never stands in for
// one of them.
package harness

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/worldgate/stack"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Graph credentials the harness gives graphd when it runs one process per service (procs.go):
// a writer for the event-processor, a reader for everything else (the same split as
// production).
const (
	GraphWriter         = "worldgate"
	GraphWriterPassword = "bench-writer"
	GraphReader         = "reader"
	GraphReaderPassword = "bench-reader"
)

// EmbeddedOptions configure the pipeline in one process.
type EmbeddedOptions struct {
	DataDir string
	// ProcessorInFlight is the event-processor's MaxInFlight (0: its default).
	ProcessorInFlight int
	Logger            *slog.Logger
}

// Embedded is the whole pipeline in this process: package stack's Pipeline (what
// `worldgate dev` runs, each worker as its own NATS user), with rate budgets and MCP rate
// limits wide enough for a load test. Its JS is the admin's connection, for the load
// generator and the tracker; no worker uses it.
type Embedded struct {
	*stack.Stack
}

// StartEmbedded starts NATS, graphd, the MCP servers, the event-processor, the memory-writer, every gate and the
// ai-worker in this process.
func StartEmbedded(ctx context.Context, o EmbeddedOptions) (*Embedded, error) {
	gcfg := GateConfig()
	st, err := stack.Start(ctx, stack.Config{
		DataDir: o.DataDir, Host: "127.0.0.1",
		// Unlimited: a load test measures the pipeline, not the MCP servers' per-client limit.
		MCPRateLimit:      &mcpx.RateLimit{},
		Budgets:           "none",
		Gates:             &gcfg,
		ProcessorInFlight: o.ProcessorInFlight,
		Logger:            o.Logger,
	}, stack.Pipeline())
	if err != nil {
		return nil, err
	}
	return &Embedded{Stack: st}, nil
}

// Provision creates the JetStream topology.
func Provision(ctx context.Context, js jetstream.JetStream, log *slog.Logger) error {
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := natsx.Provision(pctx, js, natsx.DefaultTopology(natsx.TopologyOptions{}), log); err != nil {
		return fmt.Errorf("provision JetStream: %w", err)
	}
	return nil
}

// GateConfig is the gates' default configuration with rate budgets a load test does not hit
// (the rate gate still reads and writes its KV windows for every proposal) and the process
// stack's reference wait.
func GateConfig() gates.Config {
	cfg := gates.DefaultConfig()
	cfg.Rate.Budgets = map[string]gates.Budget{"*": RateBudget}
	// World files reference what their own batch creates: on a loaded machine the default 3 s
	// is not always enough for the referenced vertex to commit (the process stack's gates run
	// with this configuration too, as their flags).
	cfg.Invariant.ReferenceWait = 15 * time.Second
	return cfg
}

// RateBudget is the per-window budget of every kind under load.
var RateBudget = gates.Budget{ActorCount: 1_000_000, ActorCostUSD: 1_000_000, GlobalCount: 100_000_000, GlobalCostUSD: 1_000_000}

// TempDir makes a scratch directory named for the program, or uses dir if given.
func TempDir(dir, program string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	d, err := os.MkdirTemp("", "worldgate-"+program+"-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { _ = os.RemoveAll(d) }, nil
}
