// Command bench drives the Worldgate pipeline with world events and reports what one machine
// carries: committed proposals/s, event-to-commit latency (p50/p95/p99), CPU seconds and peak
// RSS, and the same throughput as a share of the raw JetStream ceiling measured in the same run
// (publish → consume → republish → ack, one hop) divided by the hops of the route, so figures
// compare across machines.
//
//	go run ./scripts/bench                       # embedded stack, 20,000 moves at saturation, then at half that rate
//	go run ./scripts/bench -mix ai -n 2000       # the LLM + MCP route (scripted model)
//	go run ./scripts/bench -nats-url nats://127.0.0.1:4222   # a pipeline already running (worldgate dev)
//	go run ./scripts/bench -cpuprofile cpu.out -mutexprofile mutex.out
//
// Progress goes to stderr; the figures block to stdout (-json FILE also writes them as JSON).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/scripts/internal/harness"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

type options struct {
	n, warmup, players, ceilingN, inFlight int
	rate                                   float64
	half                                   bool
	mix, natsURL, dataDir, jsonOut         string
	cpuProfile, mutexProfile, blockProfile string
	drain                                  time.Duration
	logLevel                               string
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.n, "n", 20000, "events per measured phase")
	fs.Float64Var(&o.rate, "rate", 0, "target events/s (open loop); 0 is saturation: every player sends its next event once its previous one is decided")
	fs.BoolVar(&o.half, "half", true, "after a saturation phase, run a second phase at half the committed rate it reached (the latency figure)")
	fs.StringVar(&o.mix, "mix", harness.MixMoves, "event mix: "+strings.Join(harness.Mixes, ", "))
	fs.IntVar(&o.players, "players", 2000, "bench players; at saturation each sends its next event once its previous one is decided")
	fs.IntVar(&o.warmup, "warmup", 500, "events sent and decided before measuring")
	fs.IntVar(&o.ceilingN, "ceiling-n", 20000, "messages for the raw JetStream ceiling; 0 skips it")
	fs.IntVar(&o.inFlight, "processor-in-flight", 0, "event-processor MaxInFlight on the embedded stack (0: its default)")
	fs.StringVar(&o.natsURL, "nats-url", "", "drive a pipeline already running behind this NATS URL instead of the embedded stack")
	fs.StringVar(&o.dataDir, "data-dir", "", "data directory of the embedded stack (default: a temporary one, removed after)")
	fs.DurationVar(&o.drain, "drain-timeout", 3*time.Minute, "how long to wait for the last events to be decided")
	fs.StringVar(&o.jsonOut, "json", "", "also write the figures as JSON to this file (- for stdout)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured phases")
	fs.StringVar(&o.mutexProfile, "mutexprofile", "", "write a mutex contention profile")
	fs.StringVar(&o.blockProfile, "blockprofile", "", "write a blocking profile")
	fs.StringVar(&o.logLevel, "log-level", "error", "log level of the embedded services (logs go to stderr)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: bench [flags]\n\nDrives the pipeline with world events and prints committed proposals/s, event-to-commit latency,\nCPU seconds, peak RSS and the share of the JetStream ceiling.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.n <= 0 {
		return o, errors.New("-n must be positive")
	}
	return o, nil
}

// Phase is one measured run of events.
type Phase struct {
	Name          string  `json:"name"`
	TargetRate    float64 `json:"targetRate"` // events/s; 0 saturation
	Events        int     `json:"events"`
	Decided       int     `json:"decided"`
	Committed     int     `json:"committed"`
	Rejected      int     `json:"rejected"`
	Seconds       float64 `json:"seconds"`
	CommittedPerS float64 `json:"committedPerSecond"`
	DecidedPerS   float64 `json:"decidedPerSecond"`
	P50ms         float64 `json:"p50Ms"`
	P95ms         float64 `json:"p95Ms"`
	P99ms         float64 `json:"p99Ms"`
	MaxMs         float64 `json:"maxMs"`
	CPUSeconds    float64 `json:"cpuSeconds"`
	CeilingShare  float64 `json:"ceilingShare,omitempty"` // committed/s ÷ (ceiling ÷ hops)
	// Answers is what the phase's events got back (events.Outcome on OUTCOMES): committed,
	// fallback or refused content, abandoned (even the fallback refused) and silent (nothing).
	Answers harness.Answers `json:"answers"`
}

// Figures is the whole run.
type Figures struct {
	Date         string         `json:"date"`
	Host         harness.Host   `json:"host"`
	Stack        string         `json:"stack"`
	Mix          string         `json:"mix"`
	Hops         float64        `json:"hops"`
	Players      int            `json:"players"`
	CeilingPerS  float64        `json:"ceilingHopsPerSecond,omitempty"`
	HopLimited   float64        `json:"hopLimitedCeiling,omitempty"`
	Phases       []Phase        `json:"phases"`
	PeakRSSBytes int64          `json:"peakRssBytes,omitempty"`
	CPUSeconds   float64        `json:"cpuSeconds"`
	RejectedBy   map[string]int `json:"rejectedBy,omitempty"`
	DeadLetters  int            `json:"deadLetters"`
	Kinds        map[string]int `json:"committedByKind"`
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

func bench(ctx context.Context, o options, stderr io.Writer) (*Figures, error) {
	gen, err := harness.NewGenerator(o.mix, o.players, fmt.Sprintf("bench-%d-", time.Now().UnixNano()))
	if err != nil {
		return nil, err
	}
	prog := harness.NewProgress(stderr)
	fig := &Figures{Date: time.Now().UTC().Format(time.RFC3339), Host: harness.ThisHost(), Mix: o.mix, Hops: harness.Hops(o.mix), Players: o.players}
	var js jetstream.JetStream
	if o.natsURL != "" {
		fig.Stack = "external (" + o.natsURL + ")"
		nc, j, err := natsx.Connect(natsx.ConnConfig{URL: o.natsURL, Name: "bench"}, logx.Discard())
		if err != nil {
			return nil, err
		}
		defer nc.Close()
		js = j
	} else {
		fig.Stack = "embedded (one process)"
		dir, cleanup, err := harness.TempDir(o.dataDir, "bench")
		if err != nil {
			return nil, err
		}
		defer cleanup()
		prog.Update("starting the embedded stack in %s", dir)
		log := logx.New(stderr, "bench", o.logLevel)
		st, err := harness.StartEmbedded(ctx, harness.EmbeddedOptions{DataDir: dir, ProcessorInFlight: o.inFlight, Logger: log})
		if err != nil {
			return nil, err
		}
		defer st.Stop()
		js = st.JS
	}

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
	prog.Update("loading the demo and bench worlds (%d players)", o.players)
	if err := harness.LoadWorlds(ctx, js, t, o.players); err != nil {
		return nil, err
	}
	next := 0
	if o.warmup > 0 {
		if _, err := runPhase(ctx, o, js, gen, t, prog, "warm-up", next, o.warmup, 0); err != nil {
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

	cpu0, _ := harness.SelfUsage()
	p, err := runPhase(ctx, o, js, gen, t, prog, phaseName(o.rate), next, o.n, o.rate)
	if err != nil {
		return nil, err
	}
	next += o.n
	fig.Phases = append(fig.Phases, p)
	if o.rate == 0 && o.half && p.CommittedPerS > 0 {
		h, err := runPhase(ctx, o, js, gen, t, prog, "half rate", next, o.n, p.CommittedPerS/2)
		if err != nil {
			return nil, err
		}
		fig.Phases = append(fig.Phases, h)
	}
	prog.Done()
	cpu1, peak := harness.SelfUsage()
	if o.natsURL == "" {
		fig.CPUSeconds = (cpu1 - cpu0).Seconds()
		fig.PeakRSSBytes = peak
	}
	for i := range fig.Phases {
		if fig.HopLimited > 0 {
			fig.Phases[i].CeilingShare = fig.Phases[i].CommittedPerS / fig.HopLimited
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

// runPhase publishes events from..from+n-1 and waits until each is decided.
func runPhase(ctx context.Context, o options, js jetstream.JetStream, gen *harness.Generator, t *harness.Tracker,
	prog *harness.Progress, name string, from, n int, rate float64) (Phase, error) {
	p := Phase{Name: name, TargetRate: rate, Events: n}
	before := t.Counts()
	lat0 := len(t.Latencies())
	cpu0, _ := harness.SelfUsage()
	pub := &harness.Publisher{JS: js, Gen: gen, Rate: rate, Tracker: t}
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
	cpu1, _ := harness.SelfUsage()
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
	p.CPUSeconds = (cpu1 - cpu0).Seconds()
	return p, nil
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
	fmt.Fprintf(w, "worldgate bench — %s\n", f.Date)
	fmt.Fprintf(w, "machine         %s\n", f.Host)
	fmt.Fprintf(w, "stack           %s, scripted provider\n", f.Stack)
	fmt.Fprintf(w, "mix             %s (%g hops from event to commit), %d players\n", f.Mix, f.Hops, f.Players)
	if f.CeilingPerS > 0 {
		fmt.Fprintf(w, "JetStream       %.0f hops/s raw ceiling (one hop) → %.0f/s hop-limited for this route\n", f.CeilingPerS, f.HopLimited)
	}
	for _, p := range f.Phases {
		fmt.Fprintf(w, "%-15s %d events in %.1fs: %.0f committed/s (%d committed, %d rejected)",
			p.Name, p.Events, p.Seconds, p.CommittedPerS, p.Committed, p.Rejected)
		if p.CeilingShare > 0 {
			fmt.Fprintf(w, ", %.0f%% of the hop-limited ceiling", 100*p.CeilingShare)
		}
		fmt.Fprintf(w, "\n                %.0f decided/s · %.0f committed/s · answers: %d committed, %d fallback, %d refused %v · %d abandoned · %d silent",
			p.DecidedPerS, p.CommittedPerS, p.Answers.Committed, p.Answers.Fallback, p.Answers.Refused, p.Answers.RefusedBy, p.Answers.Abandoned, p.Answers.Silent)
		fmt.Fprintf(w, "\n                event→commit p50 %.1f ms · p95 %.1f ms · p99 %.1f ms · max %.1f ms · CPU %.1fs\n",
			p.P50ms, p.P95ms, p.P99ms, p.MaxMs, p.CPUSeconds)
	}
	if f.PeakRSSBytes > 0 {
		fmt.Fprintf(w, "process         CPU %.1fs over the measured phases · peak RSS %s\n", f.CPUSeconds, harness.MiB(f.PeakRSSBytes))
	}
	if len(f.RejectedBy) > 0 {
		fmt.Fprintf(w, "rejections      %v\n", f.RejectedBy)
	}
	fmt.Fprintf(w, "dead letters    %d\n", f.DeadLetters)
}
