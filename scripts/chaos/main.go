// Command chaos runs every Worldgate component as its own OS process (a three-node NATS
// cluster with R3 streams and buckets, graphd, the MCP servers, -processors event-processor
// replicas, one process per gate, the ai-worker; each connects as its own NATS user), publishes a
// steady stream of world events, and at random moments kills a worker (any event-processor
// replica among them), a NATS node (half of the time the leader of a stream) or graphd with
// SIGKILL and lets it restart. -nats-share of the kills are aimed at NATS nodes and
// -processor-share at event-processor replicas. A NATS node is killed only while the whole
// cluster is healthy (every node's /healthz), so a quorum always remains. At the end it checks,
// from the streams and the graph, that every event's proposal was committed or rejected exactly
// once, and that each actor's committed events follow the WORLD order of the events that caused
// them, and prints the lost, duplicated and order-violation counts.
//
//	go run ./scripts/chaos                           # 2 minutes, 20 kills, 50 events/s
//	go run ./scripts/chaos -duration 5m -kills 60 -rate 100
//	go run ./scripts/chaos -nats-nodes 1             # one NATS server, R1
//	go run ./scripts/chaos -processors 3 -kills 30 -nats-share 0.2 -processor-share 0.3   # 6 NATS, 9 replica kills
//
// It exits 1 when anything was lost, duplicated, applied out of its actor's order or disagrees
// with the graph. Progress goes to stderr, figures to stdout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/scripts/internal/harness"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/logx"
)

type options struct {
	duration, settle, downMin, downMax time.Duration
	kills, players, natsNodes, procs   int
	rate, natsShare, procShare         float64
	seed                               uint64
	split                              bool
	binDir, dataDir, jsonOut, logLevel string
}

// Kill is one fault injected.
type Kill struct {
	At      float64 `json:"atSeconds"`
	Process string  `json:"process"`
	Kind    string  `json:"kind"`               // worker, nats, graphd (an event-processor replica is a worker)
	Leader  string  `json:"leaderOf,omitempty"` // a NATS node killed as this stream's leader
	DownMs  int64   `json:"downMs"`
}

// Result is the run's figures.
type Result struct {
	Date      string       `json:"date"`
	Host      harness.Host `json:"host"`
	Seconds   float64      `json:"seconds"`
	Processes int          `json:"processes"`
	NATSNodes int          `json:"natsNodes"`
	// Processors is how many event-processor replicas ran (-processors).
	Processors int            `json:"processors"`
	Kills      []Kill         `json:"kills"`
	ByProcess  map[string]int `json:"killsByProcess"`
	ByKind     map[string]int `json:"killsByKind"`
	Leaders    int            `json:"streamLeaderKills"`
	Retries    int64          `json:"publishRetries"`
	// RejectedBy counts the run's rejection messages by gate/code (the tracker's): a refusal at
	// the commit is processor/….
	RejectedBy map[string]int `json:"rejectedBy,omitempty"`
	Audit      *harness.Audit `json:"audit"`
	DataDir    string         `json:"dataDir,omitempty"`
}

func main() {
	res, err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "chaos:", err)
		}
		os.Exit(1)
	}
	if res != nil && res.Audit.Failed() {
		os.Exit(1)
	}
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 2*time.Minute, "how long events are published (kills are spread over it)")
	fs.IntVar(&o.kills, "kills", 20, "SIGKILLs to inject")
	fs.IntVar(&o.natsNodes, "nats-nodes", 3, "NATS servers: 3 (a JetStream cluster, R3 streams and buckets) or 1")
	fs.Float64Var(&o.natsShare, "nats-share", 0.25, "fraction of the kills aimed at NATS nodes (half of them at a stream leader); the rest at workers and graphd")
	fs.IntVar(&o.procs, "processors", 1, "event-processor replicas, each its own process (event-processor, event-processor-2, …)")
	fs.Float64Var(&o.procShare, "processor-share", 0, "fraction of the kills aimed at event-processor replicas (besides the random kills of any worker, which can hit them too)")
	fs.Float64Var(&o.rate, "rate", 50, "events/s (Player.MoveRequested)")
	fs.IntVar(&o.players, "players", 400, "players; each moves every players/rate seconds")
	fs.DurationVar(&o.downMin, "down-min", 200*time.Millisecond, "shortest time a killed process stays down")
	fs.DurationVar(&o.downMax, "down-max", 3*time.Second, "longest time a killed process stays down")
	fs.DurationVar(&o.settle, "settle", 3*time.Minute, "how long to wait after the last event for every event to be decided")
	fs.Uint64Var(&o.seed, "seed", 0, "random seed (0: from the clock)")
	fs.BoolVar(&o.split, "split-gates", true, "run each gate as its own process (else one process runs every gate)")
	fs.StringVar(&o.binDir, "bin-dir", harness.DefaultBinDir(), "directory for the built binaries, kept between runs")
	fs.StringVar(&o.dataDir, "data-dir", "", "data directory (NATS store, graph, processes.log); default: temporary, kept if the check fails")
	fs.StringVar(&o.logLevel, "log-level", "warn", "the processes' -log-level (their logs go to processes.log in the data directory)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the figures as JSON to this file (- for stdout)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: chaos [flags]\n\nRuns each component as its own process, kills them at random while events flow, and checks that\nevery event was committed or rejected exactly once and that each actor's events were committed in\nthe order of the world events that caused them.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.rate <= 0 || o.duration <= 0 || o.kills < 0 || o.downMax < o.downMin || o.natsShare < 0 || o.procShare < 0 || o.natsShare+o.procShare > 1+1e-9 ||
		(o.natsNodes != 1 && o.natsNodes != 3) || o.procs < 1 {
		return o, errors.New("need -rate > 0, -duration > 0, -kills ≥ 0, -down-max ≥ -down-min, -nats-share and -processor-share ≥ 0 with a sum ≤ 1, -nats-nodes 1 or 3, and -processors ≥ 1")
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) (*Result, error) {
	o, err := parse(args, stderr)
	if err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := chaos(ctx, o, stderr)
	return res, harness.Report(stdout, res, err, o.jsonOut, printResult)
}

func chaos(ctx context.Context, o options, stderr io.Writer) (*Result, error) {
	prog := harness.NewProgress(stderr)
	rng := rand.New(rand.NewPCG(o.seed, 0))
	binDir := o.binDir
	dataDir, cleanData, err := harness.TempDir(o.dataDir, "chaos")
	if err != nil {
		return nil, err
	}
	prog.Update("building the service binaries into %s", binDir)
	if err := harness.Build(ctx, binDir); err != nil {
		return nil, err
	}
	prog.Update("starting every component as its own process (logs: %s/processes.log)", dataDir)
	ps, err := harness.StartProcs(ctx, harness.ProcsOptions{BinDir: binDir, DataDir: dataDir, Split: o.split, NATSNodes: o.natsNodes, Processors: o.procs, LogLevel: o.logLevel, Logger: logx.New(stderr, "chaos", "warn")})
	if err != nil {
		return nil, err
	}
	defer ps.Stop()
	gen, err := harness.NewGenerator(harness.MixMoves, o.players, fmt.Sprintf("chaos-%d-", o.seed))
	if err != nil {
		return nil, err
	}
	t, err := harness.StartTracker(ctx, ps.JS, gen.Prefix)
	if err != nil {
		return nil, err
	}
	defer t.Stop()
	gen.Where = t.Where
	gen.Undecided = func(corr string) bool { return !t.Decided(corr) }
	prog.Update("loading the worlds (%d players)", o.players)
	if err := harness.LoadWorlds(ctx, ps.JS, t, o.players); err != nil {
		return nil, err
	}

	res := &Result{Date: time.Now().UTC().Format(time.RFC3339), Host: harness.ThisHost(), Processes: len(ps.List), NATSNodes: o.natsNodes,
		Processors: len(ps.Processors()), ByProcess: map[string]int{}, ByKind: map[string]int{}}
	n := int(o.rate * o.duration.Seconds())
	pub := &harness.ReliablePublisher{JS: ps.JS, Gen: gen, Rate: o.rate}
	start := time.Now()
	pubErr := make(chan error, 1)
	go func() { pubErr <- pub.Run(ctx, 0, n) }()

	// Kill times spread over the publishing window, jittered; which of them hit NATS nodes and
	// which event-processor replicas (the rest hit any worker or graphd).
	at := killSlots(rng, o.kills, o.duration, o.natsShare, o.procShare)
	var targets []*harness.Proc
	for _, p := range ps.List {
		if p.Kind != "mcp" && p.Kind != "nats" {
			targets = append(targets, p)
		}
	}
	leaderStreams := []string{events.StreamProposals, events.StreamCommitted, events.StreamWorld, events.StreamOutcomes}
	natsKilled := 0
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	published := false
	var settleBy, lastAudit time.Time
	graph := graphx.Settings{URL: ps.GraphURL(), Username: harness.GraphReader, Password: harness.GraphReaderPassword, ReadOnly: true}
	for {
		c := t.Counts()
		prog.Update("%s · sent %d/%d · decided %d · committed %d · rejected %d · dead letters %d · kills %d/%d · publish retries %d",
			time.Since(start).Round(time.Second), pub.Sent.Load(), n, c.DecidedCorrs, c.CommitsCorrs, c.Rejected, c.DeadLetters,
			len(res.Kills), o.kills, pub.Retries.Load())
		for len(at) > 0 && time.Since(start) >= at[0].at {
			next := at[0]
			at = at[1:]
			p, leaderOf := targets[rng.IntN(len(targets))], ""
			if next.aim == aimProcessor {
				replicas := ps.Processors()
				p = replicas[rng.IntN(len(replicas))]
			}
			if next.aim == aimNATS {
				// Only a healthy cluster loses a node: a quorum of every stream always remains.
				p = nil
				if ps.NATSHealthy() {
					nodes := ps.NATSNodes()
					p = nodes[rng.IntN(len(nodes))]
					if natsKilled%2 == 0 {
						stream := leaderStreams[rng.IntN(len(leaderStreams))]
						if l := ps.NodeOf(ps.StreamLeader(ctx, stream)); l != nil {
							p, leaderOf = l, stream
						}
					}
				}
			}
			down := o.downMin + time.Duration(rng.Int64N(int64(o.downMax-o.downMin)+1))
			if p != nil && p.Kill(down) {
				res.Kills = append(res.Kills, Kill{At: time.Since(start).Seconds(), Process: p.Name, Kind: p.Kind, Leader: leaderOf, DownMs: down.Milliseconds()})
				res.ByProcess[p.Name]++
				res.ByKind[p.Kind]++
				if p.Kind == "nats" {
					natsKilled++
					if leaderOf != "" {
						res.Leaders++
					}
				}
			} else {
				at = append([]slot{{at: time.Since(start) + time.Second, aim: next.aim}}, at...) // it was down: try again shortly
			}
		}
		if published && len(at) == 0 && c.DecidedCorrs >= n {
			break
		}
		if published && time.Now().After(settleBy) {
			break // the audit names what is missing
		}
		if published && len(at) == 0 && time.Since(lastAudit) > 10*time.Second {
			// The live tracker only drives the progress line: ask the streams themselves.
			lastAudit = time.Now()
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			a, err := harness.AuditRun(actx, ps.JS, graph, gen, n)
			cancel()
			if err == nil && a.Lost == 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-pubErr:
			if err != nil {
				return nil, err
			}
			published = true
			settleBy = time.Now().Add(o.settle)
		case <-tick.C:
		}
	}
	prog.Update("every event published; waiting for the workers to be ready, then auditing the streams and the graph")
	if err := ps.WaitReady(ctx); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.Retries = pub.Retries.Load()
	res.RejectedBy = t.Counts().RejectedBy
	// The audit reads the streams once the cluster is whole again (every node's /healthz), and
	// a read cut short (JetStream without a meta leader for a moment, a consumer on a node that
	// just restarted) is read again.
	for healthy := time.Now().Add(2 * time.Minute); !ps.NATSHealthy() && time.Now().Before(healthy); {
		prog.Update("waiting for every NATS node to be healthy before the audit")
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	// The audit reads every stream through the JetStream API, which answers only once the
	// cluster's meta layer has a leader again: on a loaded machine, after the last kill, that
	// took over 80 s once (the API answered "no responders" meanwhile). Five minutes of tries.
	for attempt, giveUp := 1, time.Now().Add(5*time.Minute); ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		res.Audit, err = harness.AuditRun(actx, ps.JS, graph, gen, n)
		cancel()
		if err == nil || time.Now().After(giveUp) || ctx.Err() != nil {
			break
		}
		prog.Update("audit attempt %d: %v; again in 5 s", attempt, err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	prog.Done()
	if err != nil {
		return nil, err
	}
	if !res.Audit.Failed() {
		cleanData()
	} else {
		res.DataDir = dataDir
	}
	return res, nil
}

func printResult(w io.Writer, r *Result) {
	a := r.Audit
	fmt.Fprintf(w, "worldgate chaos — %s\n", r.Date)
	fmt.Fprintf(w, "machine         %s\n", r.Host)
	replicas := "event-processor replicas"
	if r.Processors == 1 {
		replicas = "event-processor"
	}
	fmt.Fprintf(w, "processes       %d (%d NATS nodes, %d %s), run %.0fs\n", r.Processes, r.NATSNodes, r.Processors, replicas, r.Seconds)
	names := make([]string, 0, len(r.ByProcess))
	for n := range r.ByProcess {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "kills           %d (SIGKILL):", len(r.Kills))
	for _, n := range names {
		fmt.Fprintf(w, " %s %d", n, r.ByProcess[n])
	}
	fmt.Fprintln(w)
	kinds := make([]string, 0, len(r.ByKind))
	for k := range r.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "kills by kind  ")
	for _, k := range kinds {
		fmt.Fprintf(w, " %s %d", k, r.ByKind[k])
	}
	fmt.Fprintf(w, " (NATS nodes killed as a stream's leader: %d)\n", r.Leaders)
	fmt.Fprintf(w, "events          %d published (%d publish retries)\n", a.Events, r.Retries)
	fmt.Fprintf(w, "outcomes        %d committed · %d rejected · %d dead letters\n", a.Committed, a.Rejected, a.DeadLetters)
	fmt.Fprintf(w, "rejected        %d proposed while an earlier move of the player was undecided (from where it stood before it), %d others\n",
		a.RejectedStale, a.Rejected-a.RejectedStale)
	for _, e := range a.RejectedExamples {
		fmt.Fprintf(w, "                %s\n", e)
	}
	if len(r.RejectedBy) > 0 {
		keys := slices.Sorted(maps.Keys(r.RejectedBy))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %d", k, r.RejectedBy[k])
		}
		fmt.Fprintf(w, "rejected by     %s\n", strings.Join(parts, " · "))
	}
	fmt.Fprintf(w, "lost            %d\n", a.Lost)
	fmt.Fprintf(w, "duplicated      %d\n", a.Duplicated)
	fmt.Fprintf(w, "graph mismatch  %d\n", a.GraphMismatch)
	for _, e := range a.Examples {
		fmt.Fprintf(w, "  e.g. %s\n", e)
	}
	fmt.Fprintf(w, "order violations %d (an actor's commits and refusals at the commit out of the WORLD order of their causes; between two commits: %d)\n", a.OrderViolations, a.CommitOrderViolations)
	for _, e := range a.OrderExamples {
		fmt.Fprintf(w, "  e.g. %s\n", e)
	}
	if r.DataDir != "" {
		fmt.Fprintf(w, "data kept in    %s (processes.log has every process's output)\n", r.DataDir)
	}
}

// What a kill slot is aimed at.
const (
	aimAny       = iota // any worker (event-processor replicas among them) or graphd
	aimNATS             // a NATS node, every other one the leader of a stream
	aimProcessor        // an event-processor replica
)

// slot is one kill: when, after the start of publishing, and what it is aimed at.
type slot struct {
	at  time.Duration
	aim int
}

// killSlots spreads kills over d, one in each of kills equal windows at a random moment of it,
// and aims round(kills × natsShare) of them, chosen at random, at NATS nodes and
// round(kills × procShare) at event-processor replicas.
func killSlots(rng *rand.Rand, kills int, d time.Duration, natsShare, procShare float64) []slot {
	natsKills := int(math.Round(float64(kills) * natsShare))
	procKills := min(int(math.Round(float64(kills)*procShare)), kills-natsKills)
	aimed := rng.Perm(kills)
	var at []slot
	for i := range kills {
		width := d / time.Duration(kills)
		s := slot{at: time.Duration(i)*width + time.Duration(rng.Int64N(int64(width)))}
		switch {
		case aimed[i] < natsKills:
			s.aim = aimNATS
		case aimed[i] < natsKills+procKills:
			s.aim = aimProcessor
		}
		at = append(at, s)
	}
	return at
}
