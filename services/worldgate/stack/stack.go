// Package stack runs the whole Worldgate pipeline in one process, on embedded NATS and
// graphd: the MCP servers, the event-processor, every gate, the ai-worker and edge. It is the
// one place that wires them; `worldgate dev`, the bench harness (scripts/internal/harness)
// and the end-to-end tests all start it.
//
// What runs is an explicit, ordered list of parts (Dev, Pipeline): each part starts after the
// ones before it and may use what they set on the Stack. Every worker connects to NATS as its
// own user (the roles of services/worldgate/policy, gates one user per process of
// gates.OneProcessPerGate), so every run exercises the production permissions; only
// provisioning and the caller's own connection (Stack.Conn) are the admin.
package stack

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
	"github.com/worldgate/worldgate/shared/admin"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// Graph users of the embedded graphd, so that the writer/read-only split is exercised exactly
// as in production. Their passwords are drawn at each start (the graph runs in this process and
// endpoints.json is rewritten), so none is a guessable constant.
const (
	GraphWriter = "worldgate"
	GraphReader = "reader"
)

// Config is what a stack is started with. The zero value of a port picks a free one.
type Config struct {
	DataDir string // NATS, the graph, keys, secrets and endpoints.json
	Host    string // interface every server listens on (default 127.0.0.1)

	NATSPort, GraphPort, AdminPort, MCPPort, EdgePort int

	SyncAlways bool // fsync every JetStream write
	// Approvers are the people who may approve held proposals, each with a NATS user
	// approver-<name> (natsauth.ApproverRole) listed in endpoints.json.
	Approvers []string
	MCPNoAuth bool // MCP servers without tokens (local development only)
	// MCPRateLimit is each MCP client's request rate (zero: 50/s, burst 100, as in dev).
	MCPRateLimit *mcpx.RateLimit

	// LLMConfig is a YAML provider file (llmsetup.Load); empty: the offline scripted provider.
	LLMConfig string
	// Budgets is the LLM budget file; "none": no budgets; empty: DefaultBudgets.
	Budgets        string
	DefaultBudgets []byte

	// Gates configures every gate (nil: gates.DefaultConfig()).
	Gates *gates.Config
	// ProcessorInFlight is the event-processor's MaxInFlight (0: its default).
	ProcessorInFlight int

	Logger *slog.Logger // default: discard
}

// Part is one component of the stack: Start runs it (its workers through Stack.Go) and
// registers what stops it (Stack.OnStop).
type Part struct {
	Name  string
	Start func(ctx context.Context, st *Stack) error
}

// Pipeline is what carries an event to the graph: the MCP servers, the event-processor, the
// memory-writer (the interaction memory the npc-dialogue role reads), the gates and the
// ai-worker, in the order their dependencies need (the gates and the ai-worker read the graph
// through the MCP part's read-only connection).
func Pipeline() []Part { return []Part{MCP, Processor, MemoryWriter, Gates, AIWorker} }

// Dev is what `worldgate dev` runs: edge (and the /play console) and the pipeline.
func Dev() []Part { return append([]Part{Edge}, Pipeline()...) }

// Stack is a running stack. Its fields are set by Start and by the parts, in order.
type Stack struct {
	Config
	Log *slog.Logger

	NATS *natsx.Embedded
	// Conn and JS are the admin's connection: provisioning, and the caller's own use
	// (summaries, a load generator). No worker uses them.
	Conn  *nats.Conn
	JS    jetstream.JetStream
	Reg   *Registry
	Admin *admin.Server
	Graph *server.Server

	// natsPasswords are the NATS users' passwords, by role (ConnectAs, NATSCredentials).
	natsPasswords  map[string]string
	graphPasswords map[string]string

	GraphRO *graphx.Conn      // graphd's read-only user, shared by readers (set by MCP)
	MCPURLs map[string]string // server name → Streamable HTTP URL (set by MCP)
	// MCPServers are the MCP servers the stack's own workers call in process (set by MCP):
	// MCPClient connects to them through the SDK's in-memory transport, not HTTP.
	MCPServers map[string]*mcp.Server
	Lore       *loretools.Server // mcp-lore, to refresh once a world is committed (set by MCP)
	MCPToken   string            // the in-process workers' read-scoped token for the MCP servers, not the one endpoints.json publishes (set by MCP)

	// Endpoints is what endpoints.json lists: URLs and credentials, by name.
	Endpoints map[string]any
	EdgeURL   string // edge, the HTTP API (and /play) (set by Edge)
	EdgeKey   string // its dev API key

	Ledger    *budget.Ledger    // the ai-worker's LLM budget ledger (nil with Budgets "none")
	Offenders *budget.Offenders // its repeat-offender counter

	// WorkersCtx ends when the stack stops; workers started with Go run under it.
	WorkersCtx    context.Context
	cancelWorkers context.CancelFunc
	workers       sync.WaitGroup
	stops         []func() // run in reverse order

	errMu sync.Mutex
	errs  []error
}

// Start starts NATS (with every role's user), provisions the JetStream topology, starts
// graphd and the admin server (metrics, health), then each part in order, and writes
// endpoints.json. On an error everything started is stopped.
func Start(ctx context.Context, cfg Config, parts []Part) (_ *Stack, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	st := &Stack{Config: cfg, Log: cfg.Logger, Reg: NewRegistry(), Endpoints: map[string]any{},
		graphPasswords: map[string]string{GraphWriter: rand.Text(), GraphReader: rand.Text()}}
	defer func() {
		if err != nil {
			st.Stop()
		}
	}()
	st.WorkersCtx, st.cancelWorkers = context.WithCancel(context.Background())
	if err := st.startNATS(ctx); err != nil {
		return nil, err
	}
	if err := st.startGraph(ctx); err != nil {
		return nil, err
	}
	if err := st.startAdmin(); err != nil {
		return nil, err
	}
	for _, p := range parts {
		if err := p.Start(ctx, st); err != nil {
			return nil, fmt.Errorf("start %s: %w", p.Name, err)
		}
	}
	return st, st.writeEndpoints()
}

func (st *Stack) startNATS(ctx context.Context) error {
	var users []natsx.User
	var err error
	st.natsPasswords, users, err = natsUsers(st.DataDir, st.Approvers)
	if err != nil {
		return err
	}
	st.NATS, err = natsx.StartEmbedded(natsx.EmbeddedConfig{
		Host: st.Host, Port: portOrRandom(st.NATSPort), StoreDir: filepath.Join(st.DataDir, "nats"),
		SyncAlways: st.SyncAlways, Users: users, Logger: st.Log,
	})
	if err != nil {
		return portHint(err, "nats-port", st.NATSPort)
	}
	st.OnStop(st.NATS.Shutdown)
	st.Endpoints["nats.url"] = st.NATS.ClientURL()
	st.Endpoints["nats.publisher"] = st.NATSCredentials(natsauth.Publisher) // worldgate publish
	st.Endpoints["nats.operator"] = st.NATSCredentials(natsauth.Operator)   // status, proposals list/show, world load, budget
	approvers := map[string]any{}                                           // proposals approve/reject, each as the person
	for _, a := range st.Approvers {
		approvers[a] = st.NATSCredentials(natsauth.ApproverRole(a))
	}
	st.Endpoints["nats.approvers"] = approvers
	st.Endpoints["nats.admin"] = st.NATSCredentials(natsauth.Admin) // every right: the nats CLI, provision

	st.Conn, st.JS, err = st.ConnectAs(natsauth.Admin)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := natsx.Provision(pctx, st.JS, natsx.DefaultTopology(natsx.TopologyOptions{}), st.Log); err != nil {
		return fmt.Errorf("provision JetStream: %w", err)
	}
	return nil
}

func (st *Stack) startGraph(ctx context.Context) error {
	var err error
	st.Graph, err = server.New(server.Config{
		Listen:  net.JoinHostPort(st.Host, strconv.Itoa(st.GraphPort)),
		DataDir: filepath.Join(st.DataDir, "graph"),
		Users: []server.User{
			{Name: GraphWriter, Password: st.graphPasswords[GraphWriter]},
			{Name: GraphReader, Password: st.graphPasswords[GraphReader], ReadOnly: true},
		},
		Logger: st.Log.With("component", "graphd"),
		// graphd's series go to the dev registry, on the admin port like every worker's.
		Registerer: st.Reg, Gatherer: st.Reg,
	})
	if err != nil {
		return err
	}
	if err := st.Graph.Start(ctx); err != nil {
		return portHint(err, "graph-port", st.GraphPort)
	}
	st.OnStop(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = st.Graph.Close(c)
	})
	st.Endpoints["graph.url"] = st.Graph.URL()
	st.Endpoints["graph.writer"] = st.GraphCredentials(GraphWriter)
	st.Endpoints["graph.reader"] = st.GraphCredentials(GraphReader)
	return nil
}

// GraphCredentials is how endpoints.json names a graph user.
func (st *Stack) GraphCredentials(user string) map[string]string {
	return map[string]string{"username": user, "password": st.graphPasswords[user]}
}

// OpenGraph connects to the embedded graphd as user (GraphWriter or GraphReader); the
// connection closes when the stack stops.
func (st *Stack) OpenGraph(user string) (*graphx.Conn, error) {
	c, err := graphx.Open(graphx.Settings{ReadOnly: user == GraphReader, URL: st.Graph.URL(), Username: user, Password: st.graphPasswords[user]})
	if err != nil {
		return nil, err
	}
	st.OnStop(c.Close)
	return c, nil
}

func (st *Stack) startAdmin() error {
	st.Reg.MustRegister(natsx.NewLagCollector(st.JS, st.Log, events.StreamWorld, events.StreamProposals))
	st.Admin = admin.New(st.Reg, st.Log)
	st.Admin.AddCheck("nats", func(context.Context) error {
		if !st.Conn.IsConnected() {
			return errors.New("not connected to NATS")
		}
		return nil
	})
	if err := st.Admin.Start(net.JoinHostPort(st.Host, strconv.Itoa(st.AdminPort))); err != nil {
		return portHint(err, "admin-port", st.AdminPort)
	}
	st.OnStop(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = st.Admin.Close(c)
	})
	st.Endpoints["metrics.url"] = "http://" + st.Admin.Addr() + "/metrics"
	st.Endpoints["health.url"] = "http://" + st.Admin.Addr() + "/readyz"
	return nil
}

// Go runs a worker until the stack stops; an error it stops with is logged and kept (Err).
func (st *Stack) Go(name string, run func(ctx context.Context) error) {
	st.workers.Add(1)
	go func() {
		defer st.workers.Done()
		if err := run(st.WorkersCtx); err != nil {
			st.Log.Error("worker stopped with an error", "worker", name, "err", err)
			st.errMu.Lock()
			st.errs = append(st.errs, fmt.Errorf("%s: %w", name, err))
			st.errMu.Unlock()
		}
	}()
}

// Err reports the workers that stopped with an error.
func (st *Stack) Err() error {
	st.errMu.Lock()
	defer st.errMu.Unlock()
	return errors.Join(st.errs...)
}

// OnStop registers f to run when the stack stops, before what was registered earlier.
func (st *Stack) OnStop(f func()) { st.stops = append(st.stops, f) }

// Stop drains the workers first, then closes the servers they use.
func (st *Stack) Stop() {
	if st.cancelWorkers != nil {
		st.cancelWorkers()
		st.workers.Wait()
	}
	for i := len(st.stops) - 1; i >= 0; i-- {
		st.stops[i]()
	}
	st.stops = nil
}

func (st *Stack) writeEndpoints() error {
	b, err := json.MarshalIndent(st.Endpoints, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(st.DataDir, "endpoints.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WaitIdle returns once every durable consumer on WORLD and PROPOSALS has nothing pending and
// nothing unacknowledged, three checks in a row.
func (st *Stack) WaitIdle(ctx context.Context) error {
	quiet := 0
	for quiet < 3 {
		busy, err := st.busyConsumers(ctx)
		if err != nil {
			return err
		}
		if len(busy) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; still busy: %s", ctx.Err(), strings.Join(busy, ", "))
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil
}

func (st *Stack) busyConsumers(ctx context.Context) ([]string, error) {
	var busy []string
	for _, stream := range []string{events.StreamWorld, events.StreamProposals} {
		s, err := st.JS.Stream(ctx, stream)
		if err != nil {
			return nil, err
		}
		lister := s.ListConsumers(ctx)
		for info := range lister.Info() {
			if info.NumPending > 0 || info.NumAckPending > 0 {
				busy = append(busy, fmt.Sprintf("%s (%d pending, %d unacked)", info.Name, info.NumPending, info.NumAckPending))
			}
		}
		if err := lister.Err(); err != nil {
			return nil, err
		}
	}
	return busy, nil
}

func portOrRandom(p int) int {
	if p == 0 {
		return -1
	}
	return p
}

// portHint names the flag to change when a fixed port is taken.
func portHint(err error, flagName string, port int) error {
	if port != 0 && strings.Contains(err.Error(), "address already in use") {
		return fmt.Errorf("%w: port %d is taken (another worldgate dev?); pass -%s 0 to pick a free port", err, port, flagName)
	}
	return err
}
