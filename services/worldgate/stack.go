package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
	"github.com/worldgate/worldgate/shared/admin"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// Development credentials of the embedded graph, so that the writer/read-only split is
// exercised exactly as in production. The passwords are drawn at each start (the graph runs in
// this process and endpoints.json is rewritten), so none is a guessable constant.
const (
	devGraphWriter = "worldgate"
	devGraphReader = "reader"
)

var (
	devGraphWriterPassword = rand.Text()
	devGraphReaderPassword = rand.Text()
)

// stack is everything `worldgate dev` runs in one process.
type stack struct {
	f     devFlags
	log   *slog.Logger
	nats  *natsx.Embedded
	nc    *nats.Conn
	js    jetstream.JetStream
	reg   *registry
	admin *admin.Server
	graph *server.Server

	// natsPasswords are the dev passwords of the NATS users (shared/natsx/natsauth), by role; st.nc
	// is the admin's connection (provisioning, the summary), each worker connects as its role.
	natsPasswords map[string]string

	graphRO  *graphx.Conn      // graphd's read-only user, shared by readers
	mcpURLs  map[string]string // server name → Streamable HTTP URL
	lore     *loretools.Server // refreshed once the demo world is committed
	mcpToken string

	endpoints map[string]any
	edgeURL   string // edge, the HTTP API (and /play)
	edgeKey   string // its dev API key

	ledger    *budget.Ledger    // the ai-worker's LLM budget ledger (nil with -budgets none)
	offenders *budget.Offenders // its repeat-offender counter

	workersCtx    context.Context
	cancelWorkers context.CancelFunc
	workers       sync.WaitGroup
	stops         []func() // run in reverse order
}

func startStack(ctx context.Context, f devFlags, log *slog.Logger) (_ *stack, err error) {
	st := &stack{f: f, log: log, reg: newRegistry(), endpoints: map[string]any{}}
	defer func() {
		if err != nil {
			st.stop()
		}
	}()
	if !f.dataDirLocked {
		unlock, err := lockDataDir(f.dataDir)
		if err != nil {
			return nil, err
		}
		st.onStop(unlock) // runs last
	}
	st.workersCtx, st.cancelWorkers = context.WithCancel(context.Background())

	var users []natsx.User
	if len(f.approvers) == 0 {
		f.approvers = []string{defaultApprover()}
	}
	st.natsPasswords, users, err = devNATSUsers(f.dataDir, f.approvers)
	if err != nil {
		return nil, err
	}
	st.nats, err = natsx.StartEmbedded(natsx.EmbeddedConfig{
		Host: f.host, Port: portOrRandom(f.natsPort), StoreDir: filepath.Join(f.dataDir, "nats"),
		SyncAlways: f.syncAlways, Users: users, Logger: log,
	})
	if err != nil {
		return nil, portHint(err, "nats-port", f.natsPort)
	}
	st.onStop(st.nats.Shutdown)
	st.endpoints["nats.url"] = st.nats.ClientURL()
	st.endpoints["nats.publisher"] = st.natsCredentials(natsauth.Publisher) // worldgate publish
	st.endpoints["nats.operator"] = st.natsCredentials(natsauth.Operator)   // status, proposals list/show, world load, budget
	approvers := map[string]any{}                                           // proposals approve/reject, each as the person
	for _, a := range f.approvers {
		approvers[a] = st.natsCredentials(natsauth.ApproverRole(a))
	}
	st.endpoints["nats.approvers"] = approvers
	st.endpoints["nats.admin"] = st.natsCredentials(natsauth.Admin) // every right: the nats CLI, provision

	st.nc, st.js, err = st.connectAs(natsauth.Admin)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := natsx.Provision(pctx, st.js, natsx.DefaultTopology(natsx.TopologyOptions{}), log); err != nil {
		return nil, err
	}

	st.graph, err = server.New(server.Config{
		Listen:  net.JoinHostPort(f.host, strconv.Itoa(f.graphPort)),
		DataDir: filepath.Join(f.dataDir, "graph"),
		Users: []server.User{
			{Name: devGraphWriter, Password: devGraphWriterPassword},
			{Name: devGraphReader, Password: devGraphReaderPassword, ReadOnly: true},
		},
		Logger: log.With("component", "graphd"),
	})
	if err != nil {
		return nil, err
	}
	if err := st.graph.Start(ctx); err != nil {
		return nil, portHint(err, "graph-port", f.graphPort)
	}
	st.onStop(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = st.graph.Close(c)
	})
	st.endpoints["graph.url"] = st.graph.URL()
	st.endpoints["graph.writer"] = map[string]string{"username": devGraphWriter, "password": devGraphWriterPassword}
	st.endpoints["graph.reader"] = map[string]string{"username": devGraphReader, "password": devGraphReaderPassword}

	st.reg.MustRegister(natsx.NewLagCollector(st.js, log, events.StreamWorld, events.StreamProposals))
	st.admin = admin.New(st.reg, log)
	st.admin.AddCheck("nats", func(context.Context) error {
		if !st.nc.IsConnected() {
			return errors.New("not connected to NATS")
		}
		return nil
	})
	if err := st.admin.Start(net.JoinHostPort(f.host, strconv.Itoa(f.adminPort))); err != nil {
		return nil, portHint(err, "admin-port", f.adminPort)
	}
	st.onStop(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = st.admin.Close(c)
	})
	st.endpoints["metrics.url"] = "http://" + st.admin.Addr() + "/metrics"
	st.endpoints["health.url"] = "http://" + st.admin.Addr() + "/readyz"

	if err := st.startParts(ctx); err != nil {
		return nil, err
	}
	return st, st.writeEndpoints()
}

// startParts starts the MCP servers and the workers, in the order their dependencies need.
func (st *stack) startParts(ctx context.Context) error {
	for _, p := range parts {
		if err := p.start(ctx, st); err != nil {
			return fmt.Errorf("start %s: %w", p.name, err)
		}
	}
	return nil
}

// part is one component of the dev stack.
type part struct {
	name  string
	start func(ctx context.Context, st *stack) error
}

// parts lists the components beyond NATS, the graph and the admin server; each file that
// adds one appends to it in an init function.
var parts []part

// goRun runs a worker until the stack stops.
func (st *stack) goRun(name string, run func(ctx context.Context) error) {
	st.workers.Add(1)
	go func() {
		defer st.workers.Done()
		if err := run(st.workersCtx); err != nil {
			st.log.Error("worker stopped with an error", "worker", name, "err", err)
		}
	}()
}

func (st *stack) onStop(f func()) { st.stops = append(st.stops, f) }

// stop drains the workers first, then closes the servers they use.
func (st *stack) stop() {
	if st.cancelWorkers != nil {
		st.cancelWorkers()
		st.workers.Wait()
	}
	for i := len(st.stops) - 1; i >= 0; i-- {
		st.stops[i]()
	}
	st.stops = nil
}

func (st *stack) writeEndpoints() error {
	b, err := json.MarshalIndent(st.endpoints, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(st.f.dataDir, "endpoints.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func portOrRandom(p int) int {
	if p == 0 {
		return -1
	}
	return p
}

func portHint(err error, flagName string, port int) error {
	if port != 0 && strings.Contains(err.Error(), "address already in use") {
		return fmt.Errorf("%w: port %d is taken (another worldgate dev?); pass -%s 0 to pick a free port", err, port, flagName)
	}
	return err
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Summary is what one demo run did, counted from the streams (and, for AI usage, from this
// process's metrics).
type Summary struct {
	Events          int            `json:"events"`
	Proposals       int            `json:"proposals"`
	ProposalsByKind map[string]int `json:"proposalsByKind"`
	Committed       int            `json:"committed"`
	Rejected        map[string]int `json:"rejected"`
	DeadLetters     int            `json:"deadLetters"`
	Tokens          int            `json:"tokens"`
	CostUSD         float64        `json:"costUsd"`
	CacheHits       int            `json:"cacheHits"`
	// InputRailBlocked counts player utterances the input rail refused before any model call.
	InputRailBlocked int `json:"inputRailBlocked"`
	// Outcomes counts the final decisions by kind (committed, fallback, refused).
	Outcomes map[string]int `json:"outcomes"`
}

// tally counts what a run did, from each stream's last sequence when the run started, so it
// counts only this run's messages even though the data directory keeps earlier ones. Each
// update reads only the messages that arrived since the previous one.
type tally struct {
	st   *stack
	next map[string]uint64 // per stream: the last sequence already counted
	sum  Summary
	seen map[string]bool // proposal ids already counted
}

var tallyStreams = []string{events.StreamWorld, events.StreamProposals, events.StreamCommitted, events.StreamDLQ, events.StreamOutcomes}

func (st *stack) newTally(ctx context.Context) (*tally, error) {
	t := &tally{st: st, next: map[string]uint64{}, seen: map[string]bool{},
		sum: Summary{ProposalsByKind: map[string]int{}, Rejected: map[string]int{}, Outcomes: map[string]int{}}}
	for _, name := range tallyStreams {
		s, err := st.js.Stream(ctx, name)
		if err != nil {
			return nil, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return nil, err
		}
		t.next[name] = info.State.LastSeq
	}
	return t, nil
}

// scan calls fn for every message of stream after what was already counted, and returns how
// many there were. With a nil fn it only counts.
func (t *tally) scan(ctx context.Context, stream string, fn func(subject string, data []byte)) (int, error) {
	s, err := t.st.js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	from, last := t.next[stream], info.State.LastSeq
	if last <= from {
		return 0, nil
	}
	if fn == nil {
		t.next[stream] = last
		return int(last - from), nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from + 1})
	if err != nil {
		return 0, err
	}
	n := 0
	for t.next[stream] < last {
		batch, err := c.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return n, err
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			if meta, err := msg.Metadata(); err == nil {
				t.next[stream] = meta.Sequence.Stream
			}
			n++
			fn(msg.Subject(), msg.Data())
		}
		if got == 0 {
			break
		}
	}
	return n, nil
}

// update brings the summary up to date and returns a copy of it.
func (t *tally) update(ctx context.Context) (*Summary, error) {
	s := &t.sum
	for stream, total := range map[string]*int{events.StreamWorld: &s.Events, events.StreamCommitted: &s.Committed, events.StreamDLQ: &s.DeadLetters} {
		n, err := t.scan(ctx, stream, nil)
		if err != nil {
			return nil, err
		}
		*total += n
	}
	_, err := t.scan(ctx, events.StreamProposals, func(subject string, data []byte) {
		switch {
		case strings.HasPrefix(subject, "proposals.rejected."):
			s.Rejected[strings.TrimPrefix(subject, "proposals.rejected.")]++
		case strings.HasPrefix(subject, "proposals.gate."):
			var p struct{ ProposalID, Kind string }
			if json.Unmarshal(data, &p) == nil && p.ProposalID != "" && !t.seen[p.ProposalID] {
				t.seen[p.ProposalID] = true
				s.Proposals++
				s.ProposalsByKind[p.Kind]++
			}
		}
	})
	if err != nil {
		return nil, err
	}
	_, err = t.scan(ctx, events.StreamOutcomes, func(subject string, _ []byte) {
		// world.outcomes.<kind>.<actor>
		if parts := strings.SplitN(subject, ".", 4); len(parts) == 4 {
			s.Outcomes[parts[2]]++
		}
	})
	if err != nil {
		return nil, err
	}
	reg := t.st.reg
	s.Tokens = int(sumMetric(reg, "worldgate_ai_tokens_total", "type", "prompt", "completion"))
	s.CostUSD = sumMetric(reg, "worldgate_ai_cost_usd_total", "")
	s.CacheHits = int(sumMetric(reg, "worldgate_ai_cache_hits_total", ""))
	s.InputRailBlocked = int(sumMetric(reg, "worldgate_ai_input_rail_total", "outcome", "blocked"))
	out := *s
	out.ProposalsByKind = maps.Clone(s.ProposalsByKind)
	out.Rejected = maps.Clone(s.Rejected)
	out.Outcomes = maps.Clone(s.Outcomes)
	return &out, nil
}

// sumMetric adds up every series of a counter, or only those whose label has one of values.
func sumMetric(g prometheus.Gatherer, name, label string, values ...string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" {
				ok := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == label && slices.Contains(values, lp.GetValue()) {
						ok = true
					}
				}
				if !ok {
					continue
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// waitIdle returns once every durable consumer on WORLD and PROPOSALS has nothing pending and
// nothing unacknowledged, three checks in a row.
func (st *stack) waitIdle(ctx context.Context) error {
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

func (st *stack) busyConsumers(ctx context.Context) ([]string, error) {
	var busy []string
	for _, stream := range []string{events.StreamWorld, events.StreamProposals} {
		s, err := st.js.Stream(ctx, stream)
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

// liveStatus keeps one status line up to date until ctx ends.
func (st *stack) liveStatus(ctx context.Context, t *tally, out *termOut) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	w, tty := out.w, out.tty
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := t.update(sctx)
		cancel()
		if err != nil {
			continue
		}
		rejected := 0
		for _, n := range s.Rejected {
			rejected += n
		}
		line := fmt.Sprintf("events %d · proposals %d · committed %d · rejected %d · dead letters %d · tokens %d · $%.4f",
			s.Events, s.Proposals, s.Committed, rejected, s.DeadLetters, s.Tokens, s.CostUSD)
		out.mu.Lock()
		switch {
		case tty:
			fmt.Fprint(w, "\r\033[K"+line)
		case line != last:
			// Not a terminal (a log, a pipe): one line per change, not one per second.
			fmt.Fprintln(w, line)
		}
		out.mu.Unlock()
		last = line
	}
}

func discardUnless(quiet bool) io.Writer {
	if quiet {
		return io.Discard
	}
	return os.Stderr
}
