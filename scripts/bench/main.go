// Command bench drives the Worldgate pipeline with world events and reports, in one run, the
// figures that carry across machines: the raw JetStream ceiling of one hop measured in the same
// run (publish → consume → republish → ack), committed proposals/s and their ratio to that
// ceiling, CPU milliseconds per event of the pipeline alone (its processes' CPU, without bench's
// own load generator and tracker), hops per event as the streams count them, and
// event-to-commit latency (p50/p95/p99) at half the saturation rate.
//
//	go run ./scripts/bench -n 3000               # the stack as its own processes, moves at saturation, then at half that rate
//	go run ./scripts/bench -compare              # the same twice in one invocation: gates fused, then unfused (-fuse=false)
//	go run ./scripts/bench -processors 3         # three event-processor replicas, each its own process
//	go run ./scripts/bench -mix ai -n 600        # the LLM + MCP route (scripted model), CPU per AI proposal
//	go run ./scripts/bench -bin-dir /tmp/old-bin -src /tmp/wg-old   # binaries built from another checkout
//	go run ./scripts/bench -stack embedded -cpuprofile cpu.out      # one process, for profiles
//	go run ./scripts/bench -nats-url nats://127.0.0.1:4222          # a pipeline already running (worldgate dev)
//
// Progress goes to stderr; the figures block to stdout (-json FILE also writes them as JSON).
package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/scripts/internal/harness"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Stacks bench can drive.
const (
	// StackProcesses runs every component as its own OS process (harness.StartProcs, what
	// chaos and soak run, plus the memory-writer) with one NATS server and every gate in one
	// process, so the pipeline's CPU is its processes' and bench's own is apart.
	StackProcesses = "processes"
	// StackEmbedded runs the whole stack inside bench (harness.StartEmbedded): its CPU figure
	// includes the load generator and the tracker, but one CPU profile shows everything.
	StackEmbedded = "embedded"
)

type options struct {
	n, warmup, players, ceilingN, inFlight int
	processors                             int
	rate                                   float64
	half                                   bool
	mix, natsURL, dataDir, jsonOut         string
	cpuProfile, mutexProfile, blockProfile string
	profileDir                             string        // -profile: each worker's CPU profile at saturation
	profileFor                             time.Duration // -profile-for
	drain, idle                            time.Duration
	logLevel                               string
	stack, binDir, src                     string
	build, compare, floor, ahead           bool
	gateFlags, compareFlags                []string
}

func main() {
	harness.RunRelayFromEnv() // bench is also the floor's relay process (-floor)
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	var gateFlags, compareFlags string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.n, "n", 20000, "events per measured phase")
	fs.Float64Var(&o.rate, "rate", 0, "target events/s (open loop); 0 is saturation: every player sends its next event once its previous one is decided")
	fs.BoolVar(&o.half, "half", true, "after a saturation phase, run a second phase at half the committed rate it reached (the latency figure)")
	fs.StringVar(&o.mix, "mix", harness.MixMoves, "event mix: "+strings.Join(harness.Mixes, ", "))
	fs.IntVar(&o.players, "players", 2000, "bench players; at saturation each sends its next event once its previous one is decided")
	fs.IntVar(&o.warmup, "warmup", 500, "events sent and decided before measuring")
	fs.IntVar(&o.ceilingN, "ceiling-n", 20000, "messages for the raw JetStream ceiling; 0 skips it")
	fs.BoolVar(&o.ahead, "ahead", false, "moves name where the player will stand once every move sent before has committed, not where its last committed move left it: a flood of valid moves from outside, each player's moves queueing behind each other (with -rate)")
	fs.StringVar(&o.stack, "stack", StackProcesses, "processes: every component its own OS process, the pipeline's CPU summed from /proc apart from bench's own; embedded: everything inside bench (for -cpuprofile)")
	fs.StringVar(&o.binDir, "bin-dir", "", "directory of the service binaries of -stack processes (default: one per checkout in the user cache directory)")
	fs.BoolVar(&o.build, "build", true, "build the service binaries into -bin-dir first; -build=false runs the binaries already there (e.g. built from an older commit)")
	fs.StringVar(&o.src, "src", "", "build the binaries from this checkout (e.g. a git worktree of an older commit) instead of the current one")
	fs.BoolVar(&o.compare, "compare", false, "measure twice in one invocation: the gates as they run by default (fused), then with -compare-flags (unfused), and print both and their ratio")
	fs.StringVar(&compareFlags, "compare-flags", "-fuse=false", "extra gate flags of the second run of -compare (space-separated)")
	fs.StringVar(&gateFlags, "gate-flags", "", "extra flags of the gate process in every run of -stack processes (space-separated)")
	fs.IntVar(&o.processors, "processors", 1, "event-processor replicas of -stack processes, each its own process (event-processor, event-processor-2, …)")
	fs.IntVar(&o.inFlight, "processor-in-flight", 0, "event-processor MaxInFlight on the embedded stack (0: its default)")
	fs.BoolVar(&o.floor, "floor", true, "-stack processes, -mix moves: after the phases, run the floor at each phase's committed rate — the same NATS server binary and the route's hand-overs between processes, each relay doing no work — and report its CPU per move beside the pipeline's")
	fs.DurationVar(&o.idle, "idle", 10*time.Second, "-stack processes: after the phases, measure the pipeline's CPU this long with no events (what it burns idle; 0 skips it)")
	fs.StringVar(&o.natsURL, "nats-url", "", "drive a pipeline already running behind this NATS URL instead of starting one")
	fs.StringVar(&o.dataDir, "data-dir", "", "data directory of the stack (default: a temporary one, removed after)")
	fs.DurationVar(&o.drain, "drain-timeout", 3*time.Minute, "how long to wait for the last events to be decided")
	fs.StringVar(&o.jsonOut, "json", "", "also write the figures as JSON to this file (- for stdout)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured phases (-stack embedded)")
	fs.StringVar(&o.mutexProfile, "mutexprofile", "", "write a mutex contention profile (-stack embedded)")
	fs.StringVar(&o.blockProfile, "blockprofile", "", "write a blocking profile (-stack embedded)")
	fs.StringVar(&o.profileDir, "profile", "", "-stack processes: start the workers with -pprof and write a CPU profile of each (event-processors, gates, ai-worker, memory-writer) for -profile-for from the start of the saturation phase into this directory, as NAME.pprof (go tool pprof BIN-DIR/BINARY DIR/NAME.pprof)")
	fs.DurationVar(&o.profileFor, "profile-for", 3*time.Second, "how long -profile records (keep the saturation phase longer: -n)")
	fs.StringVar(&o.logLevel, "log-level", "", "log level of the services: -stack embedded logs to stderr (default error), -stack processes to processes.log in the data directory (default warn; keep it with -data-dir)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: bench [flags]\n\nDrives the pipeline with world events and prints the one-hop JetStream ceiling, committed/s and\nits ratio to the ceiling, CPU per event of the pipeline alone, hops per event, event-to-commit\nlatency at saturation and at half rate, and peak RSS.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.gateFlags, o.compareFlags = strings.Fields(gateFlags), strings.Fields(compareFlags)
	switch {
	case o.n <= 0:
		return o, errors.New("-n must be positive")
	case o.processors < 1:
		return o, errors.New("-processors must be at least 1")
	case o.processors > 1 && (o.stack != StackProcesses || o.natsURL != ""):
		return o, errors.New("-processors starts that many event-processor processes: it needs -stack processes and no -nats-url (the embedded stack runs one)")
	case o.stack != StackProcesses && o.stack != StackEmbedded:
		return o, fmt.Errorf("-stack %q: use %s or %s", o.stack, StackProcesses, StackEmbedded)
	case o.compare && (o.stack != StackProcesses || o.natsURL != ""):
		return o, errors.New("-compare starts the stack twice with different gate flags: it needs -stack processes and no -nats-url")
	case (o.cpuProfile != "" || o.mutexProfile != "" || o.blockProfile != "") && (o.stack != StackEmbedded || o.natsURL != ""):
		return o, errors.New("profiles show this process only: use them with -stack embedded, where the pipeline runs inside bench")
	case o.profileDir != "" && (o.stack != StackProcesses || o.natsURL != "" || o.compare):
		return o, errors.New("-profile profiles the workers bench starts as processes: it needs -stack processes, no -nats-url and no -compare (-cpuprofile profiles the embedded stack)")
	case o.profileDir != "" && o.profileFor < time.Second:
		return o, errors.New("-profile-for must be at least 1s")
	case !o.build && o.src != "":
		return o, errors.New("-src builds the binaries: it cannot go with -build=false")
	}
	if o.binDir == "" {
		o.binDir = binDirFor(o.src)
	}
	return o, nil
}

// binDirFor is where bench keeps the binaries built from the checkout at src ("" the current
// one): one directory per checkout, so a build from another worktree (or chaos building into
// harness.DefaultBinDir meanwhile) never replaces the binaries a run is measuring.
func binDirFor(src string) string {
	dir, err := filepath.Abs(src)
	if err != nil {
		dir = src
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			dir = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(filepath.Dir(harness.DefaultBinDir()), "bench-bin", hex.EncodeToString(sum[:6]))
}

// Phase is one measured run of events.
type Phase struct {
	// Profiles are the workers' CPU profiles recorded at the start of the phase (-profile).
	Profiles      []string `json:"profiles,omitempty"`
	Name          string   `json:"name"`
	TargetRate    float64  `json:"targetRate"` // events/s; 0 saturation
	Events        int      `json:"events"`
	Decided       int      `json:"decided"`
	Committed     int      `json:"committed"`
	Rejected      int      `json:"rejected"`
	Seconds       float64  `json:"seconds"`
	CommittedPerS float64  `json:"committedPerSecond"`
	DecidedPerS   float64  `json:"decidedPerSecond"`
	P50ms         float64  `json:"p50Ms"`
	P95ms         float64  `json:"p95Ms"`
	P99ms         float64  `json:"p99Ms"`
	MaxMs         float64  `json:"maxMs"`
	// CPUSeconds is everything the run cost: bench's process (with the embedded stack, the
	// pipeline too) plus, with the process stack, the pipeline's processes.
	CPUSeconds   float64 `json:"cpuSeconds"`
	CeilingShare float64 `json:"ceilingShare,omitempty"` // committed/s ÷ (ceiling ÷ configured hops)
	// CeilingRatio is committed/s ÷ the one-hop ceiling: what share of one bare JetStream hop's
	// rate the whole pipeline reaches.
	CeilingRatio  float64 `json:"ceilingRatio,omitempty"`
	CPUMsPerEvent float64 `json:"cpuMsPerEvent"` // CPUSeconds ÷ events
	// The pipeline alone (-stack processes): its processes' CPU (utime + stime), summed and per
	// process, and bench's own (load generator and tracker) apart.
	PipelineCPUSeconds    float64 `json:"pipelineCpuSeconds,omitempty"`
	PipelineCPUMsPerEvent float64 `json:"pipelineCpuMsPerEvent,omitempty"`
	// PipelineCPUMsPerProposal divides by the proposals the phase's events led to (an AI
	// event's reprompts and fallbacks are proposals of their own).
	PipelineCPUMsPerProposal float64            `json:"pipelineCpuMsPerProposal,omitempty"`
	BenchCPUSeconds          float64            `json:"benchCpuSeconds"`
	ProcessCPUSeconds        map[string]float64 `json:"processCpuSeconds,omitempty"`
	// ProcessorCPUSeconds is the event-processor replicas' CPU summed (their entries of
	// ProcessCPUSeconds), to compare runs with different -processors.
	ProcessorCPUSeconds float64 `json:"processorCpuSeconds,omitempty"`
	// PipelineKernelShare is the part of the pipeline's CPU its processes spent in the kernel
	// (system time), and ContextSwitchesPerEvent their threads' context switches per event,
	// summed and by process (ProcessSwitchesPerEvent): the wake-ups behind a move's CPU, which
	// do not get cheaper with faster code and cost most where each one is dear (a virtual
	// machine, a low rate).
	PipelineKernelShare     float64            `json:"pipelineKernelShare,omitempty"`
	ContextSwitchesPerEvent float64            `json:"contextSwitchesPerEvent,omitempty"`
	ProcessSwitchesPerEvent map[string]float64 `json:"processContextSwitchesPerEvent,omitempty"`
	// Restarts of the stack's processes during the phase: their CPU counters started again, so
	// the pipeline's CPU is too low when this is not 0.
	Restarts  int `json:"restarts,omitempty"`
	Proposals int `json:"proposals"`
	// HopsPerEvent is measured: messages stored on PROPOSALS (every gate's output, rejections,
	// the agent's proposal) and COMMITTED during the phase, per event. Fused gates show up as
	// fewer.
	HopsPerEvent float64 `json:"hopsPerEvent"`
	// StreamMessages is what each stream stored during the phase (the rate gate's bucket as
	// its stream, KV_worldgate-rate).
	StreamMessages map[string]uint64 `json:"streamMessages"`
	// StoredPerEvent is every counted stream's messages (StreamMessages) per event: what each
	// event made NATS write.
	StoredPerEvent float64 `json:"storedPerEvent"`
	// NATSInMsgsPerEvent and NATSOutMsgsPerEvent are the messages the NATS server(s) received
	// and sent during the phase, per event (-stack processes; bench's own publishes and
	// subscriptions included): every publish, acknowledgement, request, answer and delivery is
	// one, and each is a wake-up of a process on either side.
	NATSInMsgsPerEvent  float64 `json:"natsInMsgsPerEvent,omitempty"`
	NATSOutMsgsPerEvent float64 `json:"natsOutMsgsPerEvent,omitempty"`
	// GraphWritesPerRequest is how many proposals' writes an event-processor's graph request
	// carried on average over the phase (its worldgate_commit_batch_size, every replica's);
	// absent where the processors' /metrics cannot be read (binaries from before batching).
	GraphWritesPerRequest float64 `json:"graphWritesPerRequest,omitempty"`
	// AICache is the ai-worker's context-hash cache over the phase (worldgate_ai_cache_*_total).
	AICache *CacheCounts `json:"aiCache,omitempty"`
	// AISpend is what the phase's model calls were and cost (the ai-worker's
	// worldgate_ai_requests_total and worldgate_ai_cost_usd_total), per answered event too.
	AISpend *Spend `json:"aiSpend,omitempty"`
	// Stages is where the phase's committed events spent their time, from the streams'
	// timestamps and the gates' hops (harness.Stages): the agent, each gate, the publish to
	// proposals.validated, the commit.
	Stages []harness.Stage `json:"stages,omitempty"`
	// Answers is what the phase's events got back (events.Outcome on OUTCOMES): committed,
	// fallback or refused content, abandoned (even the fallback refused) and silent (nothing).
	Answers harness.Answers `json:"answers"`
}

// Spend is the model calls (every provider call: reprompts, repairs and failed calls
// included; cache hits make none) and their cost over a phase, in all, per purpose, and per
// answered event (an event with any final outcome).
type Spend struct {
	ModelCalls            float64            `json:"modelCalls"`
	CostUSD               float64            `json:"costUsd"`
	ModelCallsByPurpose   map[string]float64 `json:"modelCallsByPurpose,omitempty"`
	ModelCallsPerAnswered float64            `json:"modelCallsPerAnsweredEvent"`
	CostUSDPerAnswered    float64            `json:"costUsdPerAnsweredEvent"`
}

// aiSpend reads the ai-worker's model calls and cost; nil when there is no ai-worker to ask.
func aiSpend(admin string) *Spend {
	if admin == "" {
		return nil
	}
	calls, _ := harness.MetricSumBy(admin, "worldgate_ai_requests_total", "purpose")
	cost, _ := harness.MetricSum(admin, "worldgate_ai_cost_usd_total")
	sp := &Spend{CostUSD: cost, ModelCallsByPurpose: calls}
	for _, n := range calls {
		sp.ModelCalls += n
	}
	return sp
}

// since is the spend from s0 to s over answered events.
func (s *Spend) since(s0 *Spend, answered int) *Spend {
	d := &Spend{ModelCalls: s.ModelCalls - s0.ModelCalls, CostUSD: s.CostUSD - s0.CostUSD, ModelCallsByPurpose: map[string]float64{}}
	for k, v := range s.ModelCallsByPurpose {
		if n := v - s0.ModelCallsByPurpose[k]; n != 0 {
			d.ModelCallsByPurpose[k] = n
		}
	}
	if answered > 0 {
		d.ModelCallsPerAnswered, d.CostUSDPerAnswered = d.ModelCalls/float64(answered), d.CostUSD/float64(answered)
	}
	return d
}

// CacheCounts are the ai-worker's cache hits and misses.
type CacheCounts struct {
	Hits   float64 `json:"hits"`
	Misses float64 `json:"misses"`
}

// FloorRun is the floor measured at the committed rate of the phase it is named after.
type FloorRun struct {
	Phase string `json:"phase"`
	harness.FloorRun
}

// Figures is the whole run.
type Figures struct {
	Date   string       `json:"date"`
	Host   harness.Host `json:"host"`
	Stack  string       `json:"stack"`
	Label  string       `json:"label,omitempty"` // fused or unfused under -compare
	BinDir string       `json:"binDir,omitempty"`
	// BinRevision is the commit the binaries were built from (harness.BinRevision), so that a
	// "before" run can be told from an "after" one.
	BinRevision string   `json:"binRevision,omitempty"`
	GateFlags   []string `json:"gateFlags,omitempty"`
	Mix         string   `json:"mix"`
	Hops        float64  `json:"hops"` // of the configured route, one process per gate
	Players     int      `json:"players"`
	// Processors is how many event-processor replicas ran (-processors; 0: unknown, a
	// pipeline behind -nats-url).
	Processors   int            `json:"processors"`
	CeilingPerS  float64        `json:"ceilingHopsPerSecond,omitempty"`
	HopLimited   float64        `json:"hopLimitedCeiling,omitempty"`
	Phases       []Phase        `json:"phases"`
	PeakRSSBytes int64          `json:"peakRssBytes,omitempty"` // with the process stack, the sum of the processes' peaks
	CPUSeconds   float64        `json:"cpuSeconds"`
	RejectedBy   map[string]int `json:"rejectedBy,omitempty"`
	DeadLetters  int            `json:"deadLetters"`
	Kinds        map[string]int `json:"committedByKind"`
	// Over the measured phases, with the process stack.
	PipelineCPUSeconds float64            `json:"pipelineCpuSeconds,omitempty"`
	BenchCPUSeconds    float64            `json:"benchCpuSeconds,omitempty"`
	ProcessCPUSeconds  map[string]float64 `json:"processCpuSeconds,omitempty"`
	ProcessPeakRSS     map[string]int64   `json:"processPeakRssBytes,omitempty"`
	// Idle is the pipeline's CPU with no events at all, after the phases (-idle, -stack
	// processes): milliseconds of CPU per second of wall time, summed and per process. At half
	// rate it adds IdleCPUMsPerSecond ÷ events/s to every event.
	IdleSeconds            float64            `json:"idleSeconds,omitempty"`
	IdleCPUMsPerSecond     float64            `json:"idleCpuMsPerSecond,omitempty"`
	IdleProcessCPUMsPerSec map[string]float64 `json:"idleProcessCpuMsPerSecond,omitempty"`
	// Floor is the floor run at each phase's committed rate (-floor): what the route's messages
	// and hand-overs cost on this machine with no work in the relays (harness.FloorStages).
	Floor []FloorRun `json:"floor,omitempty"`
	// Compare is -compare's second run (the gates unfused), measured after this one.
	Compare *Figures `json:"compare,omitempty"`
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fig, err := bench(ctx, o, stderr)
	if err != nil {
		return err
	}
	printFigures(stdout, fig)
	if o.jsonOut != "" {
		return harness.WriteJSON(o.jsonOut, fig)
	}
	return nil
}

// bench builds the binaries if asked, then measures once, or twice under -compare.
func bench(ctx context.Context, o options, stderr io.Writer) (*Figures, error) {
	prog := harness.NewProgress(stderr)
	if o.stack == StackProcesses && o.natsURL == "" {
		if o.build {
			prog.Update("building the service binaries into %s", o.binDir)
			if err := harness.BuildFrom(ctx, o.src, o.binDir); err != nil {
				return nil, err
			}
		}
		for name := range harness.Binaries {
			if _, err := os.Stat(filepath.Join(o.binDir, name)); err != nil {
				return nil, fmt.Errorf("binary %s missing in -bin-dir %s (build it, or drop -build=false): %w", name, o.binDir, err)
			}
		}
	}
	dir, cleanup, err := harness.TempDir(o.dataDir, "bench")
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			cleanup()
		}
	}()
	runs := []struct{ label, sub string }{{"", dir}}
	if o.compare {
		runs = []struct{ label, sub string }{{"fused", filepath.Join(dir, "fused")}, {"unfused", filepath.Join(dir, "unfused")}}
	}
	var first, last *Figures
	for i, r := range runs {
		flags := o.gateFlags
		if i > 0 {
			flags = slices.Concat(o.gateFlags, o.compareFlags)
		}
		fig, err := measure(ctx, o, r.sub, flags, prog, stderr)
		if err != nil {
			if o.stack == StackProcesses && o.dataDir == "" {
				keep = true
				err = fmt.Errorf("%w (data and every process's log kept in %s)", err, r.sub)
			}
			return nil, err
		}
		fig.Label = r.label
		if first == nil {
			first = fig
		} else {
			last.Compare = fig
		}
		last = fig
	}
	if o.floor && o.stack == StackProcesses && o.natsURL == "" && o.mix == harness.MixMoves {
		if first.Floor, err = measureFloor(ctx, o, filepath.Join(dir, "floor"), first.Phases, prog); err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
	}
	return first, nil
}

// measureFloor starts the floor (harness.StartFloor: its own NATS server from the bin dir, bench
// itself as the relays) and runs it once per phase, as many moves as the phase had: for the
// saturation phase all at once (a backlog, as the phase's players keep), for a phase at a rate at
// the rate the phase committed.
func measureFloor(ctx context.Context, o options, dir string, phases []Phase, prog *harness.Progress) ([]FloorRun, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "floor.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	prog.Update("starting the floor (NATS and %d relays doing no work)", len(harness.FloorStages))
	f, err := harness.StartFloor(ctx, harness.FloorOptions{NATSBin: filepath.Join(o.binDir, "natsd"), Self: self, Dir: dir, Log: log})
	if err != nil {
		return nil, err
	}
	defer f.Stop()
	if _, err := f.Run(ctx, 1000, min(o.n, 500)); err != nil { // warm-up
		return nil, err
	}
	var runs []FloorRun
	for _, p := range phases {
		if p.CommittedPerS <= 0 {
			continue
		}
		rate := p.CommittedPerS
		if p.TargetRate == 0 {
			rate = 0
		}
		prog.Update("floor beside %s", p.Name)
		r, err := f.Run(ctx, rate, p.Events)
		if err != nil {
			return nil, err
		}
		runs = append(runs, FloorRun{Phase: p.Name, FloorRun: r})
	}
	prog.Done()
	return runs, nil
}

// stack is what one measurement drives: its JetStream as the admin user (for the load
// generator and the tracker) and, with the process stack, its processes.
type stack struct {
	name    string
	js      jetstream.JetStream
	procs   *harness.Procs // nil unless -stack processes
	aiAdmin string         // the ai-worker's admin address (its /metrics); "" if none
	// processors is how many event-processor replicas run (0: unknown, behind -nats-url).
	processors int
	stop       func()
}

func startStack(ctx context.Context, o options, dir string, gateFlags []string, prog *harness.Progress, stderr io.Writer) (*stack, error) {
	switch {
	case o.natsURL != "":
		nc, js, err := natsx.Connect(natsx.ConnConfig{URL: o.natsURL, Name: "bench"}, logx.Discard())
		if err != nil {
			return nil, err
		}
		return &stack{name: "external (" + o.natsURL + ")", js: js, stop: nc.Close}, nil
	case o.stack == StackEmbedded:
		prog.Update("starting the embedded stack in %s", dir)
		log := logx.New(stderr, "bench", cmp.Or(o.logLevel, "error"))
		st, err := harness.StartEmbedded(ctx, harness.EmbeddedOptions{DataDir: dir, ProcessorInFlight: o.inFlight, Logger: log})
		if err != nil {
			return nil, err
		}
		return &stack{name: "embedded (one process)", js: st.JS, aiAdmin: st.Admin.Addr(), stop: st.Stop, processors: 1}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	prog.Update("starting the stack as processes in %s", dir)
	ps, err := harness.StartProcs(ctx, harness.ProcsOptions{BinDir: o.binDir, DataDir: dir, NATSNodes: 1, Processors: o.processors, GateFlags: gateFlags,
		MemoryWriter: true, LogLevel: o.logLevel, Pprof: o.profileDir != "", Logger: logx.New(stderr, "bench", "warn")})
	if err != nil {
		return nil, err
	}
	s := &stack{js: ps.JS, procs: ps, stop: ps.Stop, processors: len(ps.Processors())}
	var names []string
	for _, p := range ps.List {
		names = append(names, p.Name)
	}
	s.name = fmt.Sprintf("processes (%d: %s; one NATS server, every gate in one process, %d event-processor %s)",
		len(names), strings.Join(names, ", "), s.processors, plural(s.processors, "replica", "replicas"))
	if ai := ps.Lookup("ai-worker"); ai != nil {
		s.aiAdmin = ai.Admin
	}
	return s, nil
}

// graphWrites is what the event-processor replicas' graph requests have carried so far: the
// proposals' writes and the requests (worldgate_commit_batch_size's sum and count); zero where
// no replica's /metrics has it.
func (s *stack) graphWrites() (writes, requests float64) {
	if s.procs == nil {
		return 0, 0
	}
	for _, p := range s.procs.Processors() {
		if p.Admin == "" {
			continue
		}
		w, _ := harness.MetricSum(p.Admin, "worldgate_commit_batch_size_sum")
		r, _ := harness.MetricSum(p.Admin, "worldgate_commit_batch_size_count")
		writes, requests = writes+w, requests+r
	}
	return writes, requests
}

// usage is a reading of the CPU bench and the stack's processes have used so far.
type usage struct {
	self     time.Duration
	procs    map[string]harness.ProcStat
	restarts int
}

func (s *stack) usage() usage {
	u := usage{}
	u.self, _ = harness.SelfUsage()
	if s.procs != nil {
		u.procs, u.restarts = s.procs.Usage(), s.procs.Restarts()
	}
	return u
}

// natsMessages is what the NATS nodes received and sent so far (-stack processes only).
func (s *stack) natsMessages() (in, out uint64, ok bool) {
	if s.procs == nil {
		return 0, 0, false
	}
	return s.procs.NATSMessages()
}

// spent is the CPU used between two readings: bench's own, the pipeline's processes' (summed and
// per process, in seconds; harness.Between), and how many processes restarted in between.
func spent(from, to usage) (self time.Duration, pipeline harness.Spent, per map[string]float64, restarts int) {
	pipeline = harness.Between(from.procs, to.procs)
	per = map[string]float64{}
	for name, cpu := range pipeline.ProcCPU {
		per[name] = cpu.Seconds()
	}
	return to.self - from.self, pipeline, per, to.restarts - from.restarts
}

// measure starts a stack, measures the ceiling and the phases on it, and stops it.
func measure(ctx context.Context, o options, dir string, gateFlags []string, prog *harness.Progress, stderr io.Writer) (*Figures, error) {
	gen, err := harness.NewGenerator(o.mix, o.players, fmt.Sprintf("bench-%d-", time.Now().UnixNano()))
	if err != nil {
		return nil, err
	}
	fig := &Figures{Date: time.Now().UTC().Format(time.RFC3339), Host: harness.ThisHost(), Mix: o.mix, Hops: harness.Hops(o.mix), Players: o.players}
	st, err := startStack(ctx, o, dir, gateFlags, prog, stderr)
	if err != nil {
		return nil, err
	}
	defer st.stop()
	fig.Stack, fig.Processors = st.name, st.processors
	if st.procs != nil {
		fig.BinDir, fig.BinRevision, fig.GateFlags = o.binDir, harness.BinRevision(o.binDir), gateFlags
	}
	js := st.js

	if o.ceilingN > 0 {
		prog.Update("measuring the raw JetStream ceiling (%d messages, one hop)", o.ceilingN)
		c, err := harness.Ceiling(ctx, js, o.ceilingN, 1024)
		if err != nil {
			return nil, err
		}
		fig.CeilingPerS = c
		fig.HopLimited = c / fig.Hops
	}

	t, err := harness.StartTracker(ctx, js, gen.Prefix)
	if err != nil {
		return nil, err
	}
	defer t.Stop()
	gen.Where = t.Where
	if o.ahead {
		gen.Where = harness.Ahead()
	}
	prog.Update("loading the demo and bench worlds (%d players)", o.players)
	if err := harness.LoadWorlds(ctx, js, t, o.players); err != nil {
		return nil, err
	}
	next := 0
	if o.warmup > 0 {
		if _, err := runPhase(ctx, o, st, gen, t, prog, "warm-up", next, o.warmup, 0); err != nil {
			return nil, err
		}
		next += o.warmup
	}

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	if o.mutexProfile != "" {
		goruntime.SetMutexProfileFraction(5)
		defer writeProfile("mutex", o.mutexProfile)
	}
	if o.blockProfile != "" {
		goruntime.SetBlockProfileRate(int(100 * time.Microsecond))
		defer writeProfile("block", o.blockProfile)
	}

	u0 := st.usage()
	p, err := runPhase(ctx, o, st, gen, t, prog, phaseName(o.rate), next, o.n, o.rate)
	if err != nil {
		return nil, err
	}
	next += o.n
	fig.Phases = append(fig.Phases, p)
	if o.rate == 0 && o.half && p.CommittedPerS > 0 {
		h, err := runPhase(ctx, o, st, gen, t, prog, "half rate", next, o.n, p.CommittedPerS/2)
		if err != nil {
			return nil, err
		}
		fig.Phases = append(fig.Phases, h)
	}
	u1 := st.usage()
	if st.procs != nil && o.idle > 0 {
		prog.Update("measuring the pipeline idle for %s", o.idle)
		// Let the last acks and publishes settle first, so the window holds no event's work.
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		i0, t0 := st.usage(), time.Now()
		select {
		case <-time.After(o.idle):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		i1 := st.usage()
		secs := time.Since(t0).Seconds()
		_, idle, per, _ := spent(i0, i1)
		fig.IdleSeconds, fig.IdleCPUMsPerSecond = secs, 1000*idle.CPU.Seconds()/secs
		fig.IdleProcessCPUMsPerSec = map[string]float64{}
		for name, cpu := range per {
			fig.IdleProcessCPUMsPerSec[name] = 1000 * cpu / secs
		}
	}
	prog.Done()
	self, pipeline, per, _ := spent(u0, u1)
	switch {
	case st.procs != nil:
		fig.BenchCPUSeconds, fig.PipelineCPUSeconds, fig.ProcessCPUSeconds = self.Seconds(), pipeline.CPU.Seconds(), per
		fig.CPUSeconds = (self + pipeline.CPU).Seconds()
		fig.ProcessPeakRSS = map[string]int64{}
		for name, ps := range u1.procs {
			fig.ProcessPeakRSS[name] = ps.PeakRSS
			fig.PeakRSSBytes += ps.PeakRSS
		}
	case o.natsURL == "":
		_, peak := harness.SelfUsage()
		fig.CPUSeconds, fig.PeakRSSBytes = self.Seconds(), peak
	}
	for i := range fig.Phases {
		if fig.HopLimited > 0 {
			fig.Phases[i].CeilingShare = fig.Phases[i].CommittedPerS / fig.HopLimited
			fig.Phases[i].CeilingRatio = fig.Phases[i].CommittedPerS / fig.CeilingPerS
		}
	}
	c := t.Counts()
	fig.RejectedBy, fig.DeadLetters, fig.Kinds = c.RejectedBy, c.DeadLetters, c.Kinds
	return fig, nil
}

func phaseName(rate float64) string {
	if rate == 0 {
		return "saturation"
	}
	return fmt.Sprintf("%.0f events/s", rate)
}

// hopStreams are the streams whose messages are hops: the agent's proposal and every gate's
// output (PROPOSALS), the event-processor's (COMMITTED). streamsCounted adds the streams that
// take side messages (the world event, audit records, outcomes, dead letters), reported per
// phase in the JSON.
var (
	hopStreams     = []string{events.StreamProposals, events.StreamCommitted}
	streamsCounted = []string{events.StreamWorld, events.StreamProposals, events.StreamCommitted, events.StreamAudit, events.StreamOutcomes, events.StreamDLQ, rateStream}
	rateStream     = "KV_" + natsx.BucketRate
)

// aiCache reads the ai-worker's cache counters; nil when there is no ai-worker to ask.
func aiCache(admin string) *CacheCounts {
	if admin == "" {
		return nil
	}
	h, okH := harness.MetricSum(admin, "worldgate_ai_cache_hits_total")
	m, okM := harness.MetricSum(admin, "worldgate_ai_cache_misses_total")
	if !okH && !okM {
		return &CacheCounts{} // registered lazily: no AI task yet
	}
	return &CacheCounts{Hits: h, Misses: m}
}

// runPhase publishes events from..from+n-1 and waits until each is decided.
func runPhase(ctx context.Context, o options, st *stack, gen *harness.Generator, t *harness.Tracker,
	prog *harness.Progress, name string, from, n int, rate float64) (Phase, error) {
	p := Phase{Name: name, TargetRate: rate, Events: n}
	before := t.Counts()
	lat0 := len(t.Latencies())
	seq0, err := harness.StreamSeqs(ctx, st.js, streamsCounted...)
	if err != nil {
		return p, err
	}
	cache0 := aiCache(st.aiAdmin)
	spend0 := aiSpend(st.aiAdmin)
	writes0, requests0 := st.graphWrites()
	in0, out0, msgs0 := st.natsMessages()
	u0 := st.usage()
	pub := &harness.Publisher{JS: st.js, Gen: gen, Rate: rate, Tracker: t}
	var profiled chan profiles
	if o.profileDir != "" && name == phaseName(0) && st.procs != nil {
		profiled = make(chan profiles, 1)
		go func() {
			files, err := st.procs.Profile(ctx, o.profileDir, o.profileFor)
			profiled <- profiles{files, err}
		}()
	}
	start := time.Now()
	pubErr := make(chan error, 1)
	go func() { pubErr <- pub.Run(ctx, from, from+n) }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	published := false
	var drainDeadline time.Time
	for {
		c := t.Counts()
		decided := c.DecidedCorrs - before.DecidedCorrs
		el := time.Since(start).Seconds()
		prog.Update("%s: sent %d/%d · decided %d · committed %d (%.0f/s) · rejected %d · dead letters %d · %.0fs",
			name, pub.Sent.Load(), n, decided, c.CommitsCorrs-before.CommitsCorrs, float64(c.CommitsCorrs-before.CommitsCorrs)/el,
			c.Rejected-before.Rejected, c.DeadLetters, el)
		if published && decided >= n {
			break
		}
		if published && time.Now().After(drainDeadline) {
			return p, fmt.Errorf("%s: only %d of %d events decided %s after the last was sent (see -drain-timeout)", name, decided, n, o.drain)
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case err := <-pubErr:
			if err != nil {
				return p, err
			}
			published = true
			drainDeadline = time.Now().Add(o.drain)
		case <-tick.C:
		}
	}
	// Every event must get an answer (an events.Outcome): wait for the stragglers, bounded, then
	// count what each got.
	corrs := make([]string, n)
	for i := range corrs {
		corrs[i] = gen.CorrelationID(from + i)
	}
	for answerBy := time.Now().Add(min(o.drain, time.Minute)); t.AnsweredCount(corrs) < n && time.Now().Before(answerBy); {
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-tick.C:
		}
	}
	p.Answers = t.Answers(corrs)
	after := t.Counts()
	// The phase ends at the last first-commit of the phase's events.
	end := start
	for _, at := range t.CommitTimes() {
		if at.After(end) {
			end = at
		}
	}
	if end.Equal(start) {
		end = time.Now()
	}
	secs := end.Sub(start).Seconds()
	lat := t.Latencies()[lat0:]
	u1 := st.usage()
	in1, out1, msgs1 := st.natsMessages()
	if msgs0 && msgs1 {
		p.NATSInMsgsPerEvent, p.NATSOutMsgsPerEvent = float64(in1-in0)/float64(n), float64(out1-out0)/float64(n)
	}
	self, pipeline, per, restarts := spent(u0, u1)
	p.Decided = after.DecidedCorrs - before.DecidedCorrs
	p.Committed = after.CommitsCorrs - before.CommitsCorrs
	p.Rejected = after.Rejected - before.Rejected
	p.Seconds = secs
	p.CommittedPerS = float64(p.Committed) / secs
	p.DecidedPerS = float64(p.Decided) / secs
	p.P50ms, p.P95ms, p.P99ms = harness.Ms(harness.Percentile(lat, 50)), harness.Ms(harness.Percentile(lat, 95)), harness.Ms(harness.Percentile(lat, 99))
	if len(lat) > 0 {
		p.MaxMs = harness.Ms(slices.Max(lat))
	}
	for _, outs := range t.Outcomes(corrs) {
		p.Proposals += len(outs)
	}
	p.BenchCPUSeconds = self.Seconds()
	p.CPUSeconds = (self + pipeline.CPU).Seconds()
	p.CPUMsPerEvent = 1000 * p.CPUSeconds / float64(n)
	if st.procs != nil {
		p.PipelineCPUSeconds, p.ProcessCPUSeconds, p.Restarts = pipeline.CPU.Seconds(), per, restarts
		p.ProcessorCPUSeconds = processorCPU(per)
		p.PipelineCPUMsPerEvent = 1000 * p.PipelineCPUSeconds / float64(n)
		p.PipelineKernelShare = pipeline.KernelShare()
		p.ContextSwitchesPerEvent = float64(pipeline.Switches) / float64(n)
		p.ProcessSwitchesPerEvent = map[string]float64{}
		for name, c := range pipeline.ProcSwitches {
			p.ProcessSwitchesPerEvent[name] = float64(c) / float64(n)
		}
		if p.Proposals > 0 {
			p.PipelineCPUMsPerProposal = 1000 * p.PipelineCPUSeconds / float64(p.Proposals)
		}
	}
	seq1, err := harness.StreamSeqs(ctx, st.js, streamsCounted...)
	if err != nil {
		return p, err
	}
	p.StreamMessages = map[string]uint64{}
	for _, s := range streamsCounted {
		p.StreamMessages[s] = seq1[s] - seq0[s]
	}
	var stored uint64
	for _, n := range p.StreamMessages {
		stored += n
	}
	p.StoredPerEvent = float64(stored) / float64(n)
	var hops uint64
	for _, s := range hopStreams {
		hops += p.StreamMessages[s]
	}
	p.HopsPerEvent = float64(hops) / float64(n)
	if p.Stages, err = harness.Stages(ctx, st.js, seq0, seq1, gen.Prefix); err != nil {
		slog.Warn("time per stage not measured", "phase", name, "err", err)
	}
	if writes1, requests1 := st.graphWrites(); requests1 > requests0 {
		p.GraphWritesPerRequest = (writes1 - writes0) / (requests1 - requests0)
	}
	if cache1 := aiCache(st.aiAdmin); cache0 != nil && cache1 != nil {
		p.AICache = &CacheCounts{Hits: cache1.Hits - cache0.Hits, Misses: cache1.Misses - cache0.Misses}
	}
	if spend1 := aiSpend(st.aiAdmin); spend0 != nil && spend1 != nil {
		p.AISpend = spend1.since(spend0, p.Answers.Answered)
	}
	if profiled != nil {
		got := <-profiled
		if got.err != nil {
			slog.Warn("not every worker was profiled", "err", got.err)
		}
		p.Profiles = got.files
	}
	return p, nil
}

// profiles are the CPU profiles harness.Procs.Profile wrote.
type profiles struct {
	files []string
	err   error
}

func writeProfile(name, path string) {
	f, err := os.Create(path)
	if err != nil {
		slog.Error("profile", "err", err)
		return
	}
	defer f.Close()
	_ = pprof.Lookup(name).WriteTo(f, 0)
}

func printFigures(w io.Writer, f *Figures) {
	printRun(w, f)
	if f.Compare != nil {
		fmt.Fprintln(w)
		printRun(w, f.Compare)
		fmt.Fprintln(w)
		printComparison(w, f, f.Compare)
	}
}

func printRun(w io.Writer, f *Figures) {
	title := "worldgate bench"
	if f.Label != "" {
		title += " (" + f.Label + ")"
	}
	fmt.Fprintf(w, "%s — %s\n", title, f.Date)
	fmt.Fprintf(w, "machine         %s\n", f.Host)
	fmt.Fprintf(w, "stack           %s, scripted provider\n", f.Stack)
	if f.BinDir != "" {
		fmt.Fprintf(w, "binaries        %s (built from %s) · extra gate flags: %s\n", f.BinDir, cmp.Or(f.BinRevision, "an unknown commit"), orNone(strings.Join(f.GateFlags, " ")))
	}
	if f.Processors > 0 {
		fmt.Fprintf(w, "processors      %d event-processor %s\n", f.Processors, plural(f.Processors, "replica", "replicas"))
	}
	fmt.Fprintf(w, "mix             %s (%g hops from event to commit as configured, one process per gate), %d players\n", f.Mix, f.Hops, f.Players)
	if f.CeilingPerS > 0 {
		fmt.Fprintf(w, "JetStream       %.0f hops/s raw ceiling (one hop) → %.0f/s hop-limited for this route\n", f.CeilingPerS, f.HopLimited)
	}
	ai := f.Mix != harness.MixMoves
	for _, p := range f.Phases {
		fmt.Fprintf(w, "%-15s %d events in %.1fs: %.0f committed/s (%d committed, %d rejected)",
			p.Name, p.Events, p.Seconds, p.CommittedPerS, p.Committed, p.Rejected)
		if p.CeilingRatio > 0 {
			fmt.Fprintf(w, ", %.2f%% of the one-hop ceiling, %.0f%% of the hop-limited ceiling", 100*p.CeilingRatio, 100*p.CeilingShare)
		}
		fmt.Fprintf(w, "\n                %.0f decided/s · %.0f committed/s · answers: %s · %d abandoned · %d silent",
			p.DecidedPerS, p.CommittedPerS, answerCounts(&p.Answers), p.Answers.Abandoned, p.Answers.Silent)
		if ai {
			fmt.Fprintf(w, "\n                answers by kind: %s", answersByKind(&p.Answers))
			if sp := p.AISpend; sp != nil {
				fmt.Fprintf(w, "\n                model calls %.0f = %.2f per answered event (%s) · cost $%.6f = $%.6f per answered event",
					sp.ModelCalls, sp.ModelCallsPerAnswered, byShare(sp.ModelCallsByPurpose, "%s %.0f"), sp.CostUSD, sp.CostUSDPerAnswered)
			}
		}
		fmt.Fprintf(w, "\n                event→commit p50 %.1f ms · p95 %.1f ms · p99 %.1f ms · max %.1f ms · CPU %.1fs\n",
			p.P50ms, p.P95ms, p.P99ms, p.MaxMs, p.CPUSeconds)
		if p.PipelineCPUSeconds > 0 {
			fmt.Fprintf(w, "                pipeline alone: CPU %.1fs = %.2f ms per event", p.PipelineCPUSeconds, p.PipelineCPUMsPerEvent)
			if ai {
				fmt.Fprintf(w, ", %.2f ms per proposal (%d proposals)", p.PipelineCPUMsPerProposal, p.Proposals)
			}
			fmt.Fprintf(w, " (%.0f%% in the kernel) · %.1f context switches per event (%s)", 100*p.PipelineKernelShare, p.ContextSwitchesPerEvent,
				byShare(atLeast(p.ProcessSwitchesPerEvent, 0.1), "%s %.1f"))
			if f.Processors > 1 {
				fmt.Fprintf(w, " · the %d event-processor replicas together %.1fs", f.Processors, p.ProcessorCPUSeconds)
			}
			fmt.Fprintf(w, " · bench itself (load generator, tracker) %.1fs", p.BenchCPUSeconds)
			if p.Restarts > 0 {
				fmt.Fprintf(w, " · %d process restarts: CPU too low", p.Restarts)
			}
			fmt.Fprintln(w)
		} else {
			fmt.Fprintf(w, "                CPU %.2f ms per event, bench's own load generator and tracker included\n", p.CPUMsPerEvent)
		}
		if len(p.Stages) > 0 {
			parts := make([]string, len(p.Stages))
			for i, s := range p.Stages {
				parts[i] = fmt.Sprintf("%s %.1f/%.1f", s.Name, s.P50ms, s.P99ms)
			}
			fmt.Fprintf(w, "                time per stage, p50/p99 ms: %s\n", strings.Join(parts, " · "))
		}
		if len(p.Profiles) > 0 {
			fmt.Fprintf(w, "                CPU profiles of the phase's start (go tool pprof BINARY FILE): %s\n", strings.Join(p.Profiles, " "))
		}
		fmt.Fprintf(w, "                hops per event %.2f measured (PROPOSALS %d + COMMITTED %d messages ÷ %d events)\n",
			p.HopsPerEvent, p.StreamMessages[events.StreamProposals], p.StreamMessages[events.StreamCommitted], p.Events)
		fmt.Fprintf(w, "                stored per event %.2f (%s)", p.StoredPerEvent, perStream(p.StreamMessages, p.Events))
		if p.GraphWritesPerRequest > 0 {
			fmt.Fprintf(w, " · %.2f proposals' writes per event-processor graph request", p.GraphWritesPerRequest)
		}
		if p.NATSInMsgsPerEvent > 0 {
			fmt.Fprintf(w, " · NATS messages per event %.1f in, %.1f out (bench's own included)", p.NATSInMsgsPerEvent, p.NATSOutMsgsPerEvent)
		}
		fmt.Fprintln(w)
		if ai && p.AICache != nil {
			verdict := "every AI task a cache miss (distinct contexts)"
			if p.AICache.Hits > 0 {
				verdict = "some AI tasks served from the cache: CPU per proposal is too low"
			}
			fmt.Fprintf(w, "                AI cache %.0f hits, %.0f misses: %s\n", p.AICache.Hits, p.AICache.Misses, verdict)
		}
	}
	if len(f.ProcessCPUSeconds) > 0 {
		fmt.Fprintf(w, "processes       CPU %.1fs over the measured phases (bench itself %.1fs): %s\n", f.PipelineCPUSeconds, f.BenchCPUSeconds, perProcess(f.ProcessCPUSeconds))
		fmt.Fprintf(w, "                peak RSS %s summed over the processes\n", harness.MiB(f.PeakRSSBytes))
	} else if f.PeakRSSBytes > 0 {
		fmt.Fprintf(w, "process         CPU %.1fs over the measured phases · peak RSS %s\n", f.CPUSeconds, harness.MiB(f.PeakRSSBytes))
	}
	if f.IdleSeconds > 0 {
		fmt.Fprintf(w, "idle            %.1f ms of CPU per second with no events (over %.0fs): %s\n", f.IdleCPUMsPerSecond, f.IdleSeconds, perProcessMs(f.IdleProcessCPUMsPerSec))
	}
	if len(f.RejectedBy) > 0 {
		fmt.Fprintf(w, "rejections      %v\n", f.RejectedBy)
	}
	fmt.Fprintf(w, "dead letters    %d\n", f.DeadLetters)
	printFloor(w, f)
	printCarries(w, f)
}

// answerCounts is a phase's answers by outcome kind, each with its share of the answered events.
func answerCounts(a *harness.Answers) string {
	share := func(n int) string { return fmt.Sprintf("%d (%.0f%%)", n, 100*a.Share(n)) }
	s := fmt.Sprintf("%s committed new, %s reused, %s fallback, %s refused", share(a.Committed), share(a.Reused), share(a.Fallback), share(a.Refused))
	if len(a.RefusedBy) > 0 {
		s += fmt.Sprintf(" %v", a.RefusedBy)
	}
	return s + ", " + share(a.Skipped) + " skipped"
}

// answersByKind is a phase's answers per proposal kind: new/reused/fallback/refused/skipped.
func answersByKind(a *harness.Answers) string {
	kinds := slices.Sorted(maps.Keys(a.ByKind))
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		c := a.ByKind[k]
		parts[i] = fmt.Sprintf("%s %d new/%d reused/%d fallback/%d refused/%d skipped", k, c.Committed, c.Reused, c.Fallback, c.Refused, c.Skipped)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " · ")
}

// printFloor prints the floor beside the phase whose rate it ran at.
func printFloor(w io.Writer, f *Figures) {
	if len(f.Floor) == 0 {
		return
	}
	names := make([]string, len(harness.FloorStages))
	for i, s := range harness.FloorStages {
		names[i] = s.Name
	}
	fmt.Fprintf(w, "floor           the route's messages with no work: one NATS server, relays %s, %d stored per move (no graph, no rate bucket)\n",
		strings.Join(names, " → "), f.Floor[0].StoredPerMove)
	for _, r := range f.Floor {
		pipeline := 0.0
		for _, p := range f.Phases {
			if p.Name == r.Phase {
				pipeline = p.PipelineCPUMsPerEvent
			}
		}
		how := fmt.Sprintf("at %s's rate (%.0f/s, reached %.0f/s)", r.Phase, r.Rate, r.PerSecond)
		if r.Rate == 0 {
			how = fmt.Sprintf("beside %s, %d moves at once: %.0f moves/s", r.Phase, r.Moves, r.PerSecond)
			if f.CeilingPerS > 0 {
				how += fmt.Sprintf(" (%.2f%% of the one-hop ceiling)", 100*r.PerSecond/f.CeilingPerS)
			}
		}
		fmt.Fprintf(w, "                %s: %.2f ms of CPU per move (%.0f%% of the pipeline's %.2f; %.0f%% in the kernel) · %.1f context switches per move · p50 %.1f / p99 %.1f ms · %s\n",
			how, r.CPUMsPerMove, 100*r.CPUMsPerMove/pipeline, pipeline, 100*r.KernelShare, r.SwitchesPerMove, r.P50ms, r.P99ms, byShare(r.ProcessCPUMsPerMove, "%s %.2f"))
	}
}

// printCarries is the one line of figures that carry across machines.
func printCarries(w io.Writer, f *Figures) {
	if len(f.Phases) == 0 || f.Phases[0].PipelineCPUSeconds == 0 {
		return
	}
	s := f.Phases[0]
	fmt.Fprint(w, "carries over    ")
	if f.CeilingPerS > 0 {
		fmt.Fprintf(w, "one-hop ceiling %.0f/s · committed %.0f/s = %.2f%% of it · ", f.CeilingPerS, s.CommittedPerS, 100*s.CeilingRatio)
	}
	fmt.Fprintf(w, "pipeline CPU %.2f ms per event at %s", s.PipelineCPUMsPerEvent, s.Name)
	if len(f.Phases) > 1 {
		h := f.Phases[1]
		fmt.Fprintf(w, ", %.2f at half rate · context switches per event %.1f, %.1f at half rate · %.2f hops per event · half rate p50 %.1f / p95 %.1f / p99 %.1f ms",
			h.PipelineCPUMsPerEvent, s.ContextSwitchesPerEvent, h.ContextSwitchesPerEvent, s.HopsPerEvent, h.P50ms, h.P95ms, h.P99ms)
	} else {
		fmt.Fprintf(w, " · %.1f context switches per event · %.2f hops per event", s.ContextSwitchesPerEvent, s.HopsPerEvent)
	}
	if len(f.Floor) > 0 {
		fl := make([]string, len(f.Floor))
		for i, r := range f.Floor {
			fl[i] = fmt.Sprintf("%.2f", r.CPUMsPerMove)
		}
		fmt.Fprintf(w, " · floor %s ms per move at the same rates", strings.Join(fl, ", "))
	}
	fmt.Fprintln(w)
}

// printComparison prints the two runs of -compare side by side: the first (fused) against the
// second (unfused), and their ratio.
func printComparison(w io.Writer, a, b *Figures) {
	fmt.Fprintf(w, "compare         %s vs %s (extra gate flags %s), same invocation; ratio is %s ÷ %s\n",
		a.Label, b.Label, orNone(strings.Join(b.GateFlags, " ")), a.Label, b.Label)
	row := func(name string, x, y float64, unit string) {
		r := 0.0
		if y != 0 {
			r = x / y
		}
		fmt.Fprintf(w, "  %-36s %10.2f %10.2f   %.2f×  %s\n", name, x, y, r, unit)
	}
	fmt.Fprintf(w, "  %-36s %10s %10s\n", "", a.Label, b.Label)
	row("one-hop ceiling", a.CeilingPerS, b.CeilingPerS, "hops/s")
	for i := range min(len(a.Phases), len(b.Phases)) {
		pa, pb := a.Phases[i], b.Phases[i]
		name := pa.Name
		if i == 1 {
			name = "half rate"
		}
		row(name+": committed/s", pa.CommittedPerS, pb.CommittedPerS, "")
		row(name+": ÷ one-hop ceiling", 100*pa.CeilingRatio, 100*pb.CeilingRatio, "%")
		row(name+": pipeline CPU per event", pa.PipelineCPUMsPerEvent, pb.PipelineCPUMsPerEvent, "ms")
		if a.Mix != harness.MixMoves {
			row(name+": pipeline CPU per proposal", pa.PipelineCPUMsPerProposal, pb.PipelineCPUMsPerProposal, "ms")
		}
		row(name+": context switches per event", pa.ContextSwitchesPerEvent, pb.ContextSwitchesPerEvent, "")
		row(name+": hops per event", pa.HopsPerEvent, pb.HopsPerEvent, "measured")
		row(name+": p50", pa.P50ms, pb.P50ms, "ms")
		row(name+": p95", pa.P95ms, pb.P95ms, "ms")
		row(name+": p99", pa.P99ms, pb.P99ms, "ms")
	}
}

func perProcess(m map[string]float64) string { return byShare(m, "%s %.1fs") }

// atLeast is m without the entries below floor.
func atLeast(m map[string]float64, floor float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if v >= floor {
			out[k] = v
		}
	}
	return out
}

func perProcessMs(m map[string]float64) string { return byShare(m, "%s %.1f") }

// perStream formats what each stream stored per event, the largest first, leaving out those
// that stored nothing.
func perStream(m map[string]uint64, events int) string {
	per := map[string]float64{}
	for s, n := range m {
		if n > 0 {
			per[s] = float64(n) / float64(events)
		}
	}
	return byShare(per, "%s %.2f")
}

// byShare formats m's entries with format (name, value), the largest first.
func byShare(m map[string]float64, format string) string {
	names := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(names, func(x, y string) int {
		switch {
		case m[x] > m[y]:
			return -1
		case m[x] < m[y]:
			return 1
		}
		return 0
	})
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf(format, n, m[n]))
	}
	return strings.Join(parts, ", ")
}

// processorCPU is the event-processor replicas' CPU seconds in per (seconds by process name).
func processorCPU(per map[string]float64) float64 {
	var sum float64
	for name, s := range per {
		if harness.IsProcessor(name) {
			sum += s
		}
	}
	return sum
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
