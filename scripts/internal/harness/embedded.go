// Package harness is what the load, soak and chaos programs share: the pipeline started in
// one process or as one process per worker, the synthetic world and its events, a tracker that
// reads every outcome back from the streams, and process figures (CPU, RSS).
//
// It drives the real services (the same packages `worldgate dev` wires) and never stands in for
// one of them.
package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/gate/attest/attesttest"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// Graph credentials the harness gives graphd: a writer for the event-processor, a reader for
// everything else (the same split as production).
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

// Embedded is the whole pipeline in this process, on embedded NATS and graphd: what
// `worldgate dev` runs, with rate budgets wide enough for a load test.
type Embedded struct {
	NATS  *natsx.Embedded
	Conn  *nats.Conn
	JS    jetstream.JetStream
	Graph *server.Server
	Reg   *prometheus.Registry

	cancel context.CancelFunc
	wg     sync.WaitGroup
	stops  []func()
	errMu  sync.Mutex
	errs   []error
}

// StartEmbedded starts NATS, graphd, the MCP servers, the event-processor, every gate and the
// ai-worker in this process.
func StartEmbedded(ctx context.Context, o EmbeddedOptions) (e *Embedded, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	log := o.Logger
	e = &Embedded{Reg: metrics.NewRegistry()}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	e.NATS, err = natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: filepath.Join(o.DataDir, "nats"), Logger: log})
	if err != nil {
		return nil, err
	}
	e.onStop(e.NATS.Shutdown)
	e.Conn, e.JS, err = natsx.Connect(natsx.ConnConfig{URL: e.NATS.ClientURL(), Name: "bench-stack"}, log)
	if err != nil {
		return nil, err
	}
	e.onStop(func() { _ = e.Conn.Drain() })
	if err := Provision(ctx, e.JS, log); err != nil {
		return nil, err
	}
	e.Graph, err = server.New(server.Config{
		Listen: "127.0.0.1:0", DataDir: filepath.Join(o.DataDir, "graph"),
		Users:  []server.User{{Name: GraphWriter, Password: GraphWriterPassword}, {Name: GraphReader, Password: GraphReaderPassword, ReadOnly: true}},
		Logger: log.With("component", "graphd"),
	})
	if err != nil {
		return nil, err
	}
	if err := e.Graph.Start(ctx); err != nil {
		return nil, err
	}
	e.onStop(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Graph.Close(c)
	})

	// MCP servers on one port.
	secret := []byte("bench-secret-bench-secret-bench-secret")
	token, err := mcpx.IssueJWT(secret, "bench", []string{mcpx.ScopeWorldRead, mcpx.ScopeLoreRead, mcpx.ScopeClassifyRead}, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	common := mcpx.Options{Logger: log.With("component", "mcp"), Registerer: e.Reg, Auth: mcpx.AuthConfig{JWTSecret: secret}}
	graphRO, err := graphx.Open(graphx.Settings{ReadOnly: true, URL: e.Graph.URL(), Username: GraphReader, Password: GraphReaderPassword})
	if err != nil {
		return nil, err
	}
	e.onStop(graphRO.Close)
	world, err := worldtools.New(worldtools.Options{Options: common, GraphConn: graphRO, JetStream: e.JS})
	if err != nil {
		return nil, err
	}
	lore, err := loretools.New(loretools.Options{Options: common, GraphConn: graphRO, RefreshInterval: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	classify, err := classifytools.New(classifytools.Options{Options: common})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp/world", world.Handler())
	mux.Handle("/mcp/lore", lore.Handler())
	mux.Handle("/mcp/classify", classify.Handler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	e.onStop(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(c)
	})
	base := "http://" + ln.Addr().String() + "/mcp/"
	mcpClient := func(names ...string) (*client.Client, error) {
		cfg := client.Config{Logger: log.With("component", "mcp-client")}
		for _, n := range names {
			cfg.Servers = append(cfg.Servers, client.ServerConfig{Name: n, URL: base + n, Token: token})
		}
		c, err := client.New(ctx, cfg)
		if err != nil {
			return nil, err
		}
		e.onStop(func() { _ = c.Close() })
		return c, nil
	}

	var workersCtx context.Context
	workersCtx, e.cancel = context.WithCancel(context.Background())
	e.wg.Add(1)
	go func() { defer e.wg.Done(); lore.Run(workersCtx) }()
	run := func(app *runtime.App) {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if err := app.Run(workersCtx); err != nil {
				e.errMu.Lock()
				e.errs = append(e.errs, err)
				e.errMu.Unlock()
			}
		}()
	}
	newApp := func(name string) (*runtime.App, error) {
		return runtime.New(runtime.Options{Name: name, Conn: e.Conn, JetStream: e.JS, Registerer: e.Reg, Logger: log.With("worker", name)})
	}

	// event-processor: the only writer.
	writer, err := graphx.Open(graphx.Settings{URL: e.Graph.URL(), Username: GraphWriter, Password: GraphWriterPassword})
	if err != nil {
		return nil, err
	}
	e.onStop(writer.Close)
	app, err := newApp("event-processor")
	if err != nil {
		return nil, err
	}
	keys := attesttest.New() // each gate's signing key, and the keyring the processor checks
	if _, err := processor.Register(app, processor.Deps{Graph: writer, Keyring: keys.Ring, Registerer: e.Reg, Logger: log, MaxInFlight: o.ProcessorInFlight}); err != nil {
		return nil, err
	}
	run(app)

	// gates
	cls, err := mcpClient("classify")
	if err != nil {
		return nil, err
	}
	app, err = newApp("gate")
	if err != nil {
		return nil, err
	}
	if err := gates.Register(app, gates.Deps{JetStream: e.JS, Classify: cls, Graph: graphRO, Templates: TemplateLookup{},
		Signers: keys.Signers, Config: GateConfig(), Registerer: e.Reg, Logger: log}, []string{"all"}); err != nil {
		return nil, err
	}
	run(app)

	// ai-worker with the scripted provider
	provider, err := llmsetup.Default(llmsetup.Options{Registerer: e.Reg, Logger: log})
	if err != nil {
		return nil, err
	}
	tools, err := mcpClient("world", "lore", "classify")
	if err != nil {
		return nil, err
	}
	kv, err := e.JS.KeyValue(ctx, natsx.BucketAICache)
	if err != nil {
		return nil, err
	}
	app, err = newApp("ai-worker")
	if err != nil {
		return nil, err
	}
	if err := aiworker.Register(app, aiworker.Deps{LLM: provider, Tools: tools, KV: kv, Registerer: e.Reg, Logger: log}); err != nil {
		return nil, err
	}
	run(app)
	return e, nil
}

// Err reports a worker that stopped with an error.
func (e *Embedded) Err() error {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	return errors.Join(e.errs...)
}

func (e *Embedded) onStop(f func()) { e.stops = append(e.stops, f) }

// Stop drains the workers, then closes the servers.
func (e *Embedded) Stop() {
	if e.cancel != nil {
		e.cancel()
		e.wg.Wait()
	}
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
	e.stops = nil
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
// (the rate gate still reads and writes its KV windows for every proposal).
func GateConfig() gates.Config {
	cfg := gates.DefaultConfig()
	cfg.Rate.Budgets = map[string]gates.Budget{"*": RateBudget}
	return cfg
}

// RateBudget is the per-window budget of every kind under load.
var RateBudget = gates.Budget{ActorCount: 1_000_000, ActorCostUSD: 1_000_000, GlobalCount: 100_000_000, GlobalCostUSD: 1_000_000}

// TemplateLookup answers the replay gate from the ai-worker's template registry.
type TemplateLookup struct{}

// Lookup implements gates.TemplateLookup.
func (TemplateLookup) Lookup(id, version string) (string, bool) {
	t, ok := templates.Registry().GetVersion(id, version)
	if !ok {
		return "", false
	}
	return t.SHA256, true
}

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
