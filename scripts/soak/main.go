// Command soak runs every Worldgate component as its own process (by default on a three-node
// NATS cluster with R3 streams and buckets, each component its own NATS user) under a constant
// moves-only load for a set time and reports, per process and over time, resident memory (RSS,
// from /proc), goroutines (go_goroutines from its /metrics) and, for the NATS nodes and graphd,
// disk use, flagging growth: RSS more than -rss-growth above its level right after the
// warm-up, or goroutines more than 20 (and 25 %) above it (both compared as medians: the first
// samples after the warm-up, the last three).
//
//	go run ./scripts/soak                           # 12 minutes at 100 events/s, 2 of them warm-up
//	go run ./scripts/soak -duration 30m -rate 200 -json soak.json
//	go run ./scripts/soak -duration 36m -warmup 6m -marker-horizon 5m \
//	    -retention WORLD=2m,PROPOSALS=2m,OUTCOMES=5m,COMMITTED=5m,AUDIT=5m   # past the marker horizon
//
// A warm-up longer than the event-processor's marker horizon measures the graph once markers
// are pruned as fast as they are made; the horizon must cover WORLD's and PROPOSALS' max ages,
// so a short one needs a short -retention for them.
//
// It exits 1 when a process grew. Progress goes to stderr, the table to stdout.
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/worldgate/worldgate/scripts/internal/harness"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

type options struct {
	duration, warmup, interval time.Duration
	rate                       float64
	players                    int
	rssGrowth                  float64
	split                      bool
	binDir, dataDir, jsonOut   string
	natsNodes                  int
	retention                  string
	horizon                    time.Duration
	topology                   natsx.TopologyOptions
}

// Sample is one process at one moment.
type Sample struct {
	At         float64 `json:"atSeconds"`
	RSS        int64   `json:"rssBytes"`
	Goroutines int     `json:"goroutines"`          // -1: the process exports no metrics
	Disk       int64   `json:"diskBytes,omitempty"` // a NATS node's store or graphd's data
}

// Series is one process over the run.
type Series struct {
	Process     string   `json:"process"`
	Samples     []Sample `json:"samples"`
	BaseRSS     int64    `json:"baseRssBytes"`  // median of the first samples after the warm-up
	FinalRSS    int64    `json:"finalRssBytes"` // median of the last three samples
	RSSGrowth   float64  `json:"rssGrowth"`     // FinalRSS / BaseRSS - 1
	BaseDisk    int64    `json:"baseDiskBytes,omitempty"`
	FinalDisk   int64    `json:"finalDiskBytes,omitempty"`
	MaxDisk     int64    `json:"maxDiskBytes,omitempty"`
	BaseGor     int      `json:"baseGoroutines"`
	FinalGor    int      `json:"finalGoroutines"`
	Flagged     bool     `json:"flagged"`
	FlagReasons []string `json:"flagReasons,omitempty"`
}

// Result is the run.
type Result struct {
	Date      string         `json:"date"`
	Host      harness.Host   `json:"host"`
	Rate      float64        `json:"rate"`
	NATSNodes int            `json:"natsNodes"`
	Horizon   string         `json:"markerHorizon,omitempty"`
	Retention string         `json:"retention,omitempty"`
	Seconds   float64        `json:"seconds"`
	Warmup    float64        `json:"warmupSeconds"`
	Events    int64          `json:"events"`
	Committed int            `json:"committed"`
	Rejected  int            `json:"rejected"`
	Dead      int            `json:"deadLetters"`
	Series    []*Series      `json:"processes"`
	Flagged   int            `json:"flagged"`
	Rejects   map[string]int `json:"rejectedBy,omitempty"`
}

func main() {
	res, err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "soak:", err)
		}
		os.Exit(1)
	}
	if res != nil && res.Flagged > 0 {
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) (*Result, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 12*time.Minute, "total load time, warm-up included")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Minute, "load before the baseline is taken")
	fs.DurationVar(&o.interval, "interval", 30*time.Second, "sampling interval")
	fs.Float64Var(&o.rate, "rate", 100, "events/s (Player.MoveRequested)")
	fs.IntVar(&o.players, "players", 2000, "players; each moves every players/rate seconds")
	fs.Float64Var(&o.rssGrowth, "rss-growth", 0.10, "flag a process whose RSS ends more than this fraction above its post-warm-up level")
	fs.BoolVar(&o.split, "split-gates", true, "run each gate as its own process")
	fs.StringVar(&o.binDir, "bin-dir", harness.DefaultBinDir(), "directory for the built binaries, kept between runs")
	fs.StringVar(&o.dataDir, "data-dir", "", "data directory (default: a temporary one, removed after)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the figures as JSON to this file (- for stdout)")
	fs.IntVar(&o.natsNodes, "nats-nodes", 3, "NATS servers: 3 (a JetStream cluster, R3 streams and buckets) or 1")
	fs.DurationVar(&o.horizon, "marker-horizon", 0, "the event-processor's -marker-horizon (0: its default); at least WORLD's plus PROPOSALS' max age")
	topo := flag.NewFlagSet("", flag.ContinueOnError)
	o.topology.RegisterFlags(topo)
	for _, name := range []string{"retention", "duplicate-window"} {
		f := topo.Lookup(name)
		fs.Var(f.Value, name, f.Usage)
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: soak [flags]\n\nConstant load on the pipeline run as one process per component; RSS and goroutines per process over time.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.retention = fs.Lookup("retention").Value.String()
	if o.warmup >= o.duration || o.rate <= 0 || o.interval <= 0 || (o.natsNodes != 1 && o.natsNodes != 3) {
		return nil, errors.New("need -warmup < -duration, -rate > 0, -interval > 0 and -nats-nodes 1 or 3")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := soak(ctx, o, stderr)
	return res, harness.Report(stdout, res, err, o.jsonOut, printResult)
}

func soak(ctx context.Context, o options, stderr io.Writer) (*Result, error) {
	prog := harness.NewProgress(stderr)
	binDir := o.binDir
	dataDir, cleanData, err := harness.TempDir(o.dataDir, "soak")
	if err != nil {
		return nil, err
	}
	defer cleanData()
	prog.Update("building the service binaries")
	if err := harness.Build(ctx, binDir); err != nil {
		return nil, err
	}
	prog.Update("starting the processes")
	ps, err := harness.StartProcs(ctx, harness.ProcsOptions{BinDir: binDir, DataDir: dataDir, Split: o.split, NATSNodes: o.natsNodes,
		Topology: o.topology, MarkerHorizon: o.horizon, Logger: logx.New(stderr, "soak", "warn")})
	if err != nil {
		return nil, err
	}
	defer ps.Stop()
	gen, err := harness.NewGenerator(harness.MixMoves, o.players, fmt.Sprintf("soak-%d-", time.Now().UnixNano()))
	if err != nil {
		return nil, err
	}
	t, err := harness.StartTracker(ctx, ps.JS, gen.Prefix)
	if err != nil {
		return nil, err
	}
	defer t.Stop()
	gen.Where = t.Where
	prog.Update("loading the worlds (%d players)", o.players)
	if err := harness.LoadWorlds(ctx, ps.JS, t, o.players); err != nil {
		return nil, err
	}

	res := &Result{Date: time.Now().UTC().Format(time.RFC3339), Host: harness.ThisHost(), Rate: o.rate, Warmup: o.warmup.Seconds(), NATSNodes: o.natsNodes}
	if o.horizon > 0 {
		res.Horizon = o.horizon.String()
	}
	if len(o.topology.Limits) > 0 {
		res.Retention = o.retention
	}
	series := map[string]*Series{}
	for _, p := range ps.List {
		s := &Series{Process: p.Name}
		series[p.Name] = s
		res.Series = append(res.Series, s)
	}
	n := int(o.rate * o.duration.Seconds())
	pub := &harness.ReliablePublisher{JS: ps.JS, Gen: gen, Rate: o.rate}
	start := time.Now()
	pctx, cancelPub := context.WithCancel(ctx)
	defer cancelPub()
	pubErr := make(chan error, 1)
	go func() { pubErr <- pub.Run(pctx, 0, n) }()
	sample := time.NewTicker(o.interval)
	defer sample.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	take := func() {
		at := time.Since(start).Seconds()
		for _, p := range ps.List {
			s := Sample{At: at, Goroutines: -1}
			if pid := p.PID(); pid > 0 {
				if st, err := harness.ReadProc(pid); err == nil {
					s.RSS = st.RSS
				}
			}
			if p.Admin != "" {
				s.Goroutines = goroutines(p.Admin)
			}
			if p.Dir != "" {
				s.Disk = harness.DirSize(p.Dir)
			}
			series[p.Name].Samples = append(series[p.Name].Samples, s)
		}
	}
	take()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-pubErr:
			if err != nil {
				return nil, err
			}
			done = true
		case <-sample.C:
			take()
		case <-tick.C:
			c := t.Counts()
			phase := "warm-up"
			if time.Since(start) > o.warmup {
				phase = "measuring"
			}
			prog.Update("%s %s/%s · sent %d · committed %d · rejected %d · dead letters %d · %s",
				phase, time.Since(start).Round(time.Second), o.duration, pub.Sent.Load(), c.CommitsCorrs, c.Rejected, c.DeadLetters, rssLine(series))
		}
	}
	take()
	prog.Done()
	res.Seconds = time.Since(start).Seconds()
	res.Events = pub.Sent.Load()
	c := t.Counts()
	res.Committed, res.Rejected, res.Dead, res.Rejects = c.CommitsCorrs, c.Rejected, c.DeadLetters, c.RejectedBy
	for _, s := range res.Series {
		judge(s, o)
		if s.Flagged {
			res.Flagged++
		}
	}
	return res, nil
}

// judge compares the end of the run with the level right after the warm-up.
func judge(s *Series, o options) {
	var base, tail []Sample
	for _, x := range s.Samples {
		if x.At >= o.warmup.Seconds() && x.At < o.warmup.Seconds()+90 {
			base = append(base, x)
		}
	}
	if len(s.Samples) >= 3 {
		tail = s.Samples[len(s.Samples)-3:]
	}
	if len(base) == 0 || len(tail) == 0 {
		return
	}
	s.BaseRSS, s.FinalRSS = medianRSS(base), medianRSS(tail)
	s.BaseGor, s.FinalGor = medianGor(base), medianGor(tail)
	for _, x := range s.Samples {
		s.MaxDisk = max(s.MaxDisk, x.Disk)
	}
	s.BaseDisk, s.FinalDisk = base[0].Disk, tail[len(tail)-1].Disk
	if s.BaseRSS > 0 {
		s.RSSGrowth = float64(s.FinalRSS)/float64(s.BaseRSS) - 1
	}
	if s.RSSGrowth > o.rssGrowth {
		s.Flagged = true
		s.FlagReasons = append(s.FlagReasons, fmt.Sprintf("RSS %+.0f%% since the warm-up", 100*s.RSSGrowth))
	}
	// Goroutines rise and fall with the messages in flight (up to 64 in the event-processor):
	// only a rise beyond that noise counts.
	if s.BaseGor > 0 && s.FinalGor > s.BaseGor+max(20, s.BaseGor/4) {
		s.Flagged = true
		s.FlagReasons = append(s.FlagReasons, fmt.Sprintf("goroutines %d → %d", s.BaseGor, s.FinalGor))
	}
}

func medianRSS(xs []Sample) int64 {
	v := make([]int64, len(xs))
	for i, x := range xs {
		v[i] = x.RSS
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func medianGor(xs []Sample) int {
	v := make([]int, len(xs))
	for i, x := range xs {
		v[i] = x.Goroutines
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// goroutines reads go_goroutines from an admin server's /metrics; -1 if it cannot.
func goroutines(admin string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return int(f)
			}
		}
	}
	return -1
}

func rssLine(series map[string]*Series) string {
	var total int64
	for _, s := range series {
		if len(s.Samples) > 0 {
			total += s.Samples[len(s.Samples)-1].RSS
		}
	}
	return "RSS total " + harness.MiB(total)
}

func printResult(w io.Writer, r *Result) {
	fmt.Fprintf(w, "worldgate soak — %s\n", r.Date)
	fmt.Fprintf(w, "machine         %s\n", r.Host)
	fmt.Fprintf(w, "load            %.0f events/s for %.0fs (warm-up %.0fs): %d sent, %d committed, %d rejected, %d dead letters\n",
		r.Rate, r.Seconds, r.Warmup, r.Events, r.Committed, r.Rejected, r.Dead)
	fmt.Fprintf(w, "cluster         %d NATS nodes; marker horizon %s; retention %s\n", r.NATSNodes, cmp.Or(r.Horizon, "default"), cmp.Or(r.Retention, "defaults"))
	fmt.Fprintf(w, "%-20s %12s %12s %8s %12s  %s\n", "process", "RSS base", "RSS end", "growth", "goroutines", "")
	for _, s := range r.Series {
		gor := "n/a"
		if s.BaseGor >= 0 && s.FinalGor >= 0 {
			gor = fmt.Sprintf("%d → %d", s.BaseGor, s.FinalGor)
		}
		flag := ""
		if s.Flagged {
			flag = "GROWTH: " + strings.Join(s.FlagReasons, "; ")
		}
		fmt.Fprintf(w, "%-20s %12s %12s %+7.1f%% %12s  %s\n", s.Process, harness.MiB(s.BaseRSS), harness.MiB(s.FinalRSS), 100*s.RSSGrowth, gor, flag)
	}
	for _, s := range r.Series {
		if s.MaxDisk > 0 {
			fmt.Fprintf(w, "disk %-15s after warm-up %s, end %s, max %s\n", s.Process, harness.MiB(s.BaseDisk), harness.MiB(s.FinalDisk), harness.MiB(s.MaxDisk))
		}
	}
	if len(r.Series) > 0 && len(r.Series[0].Samples) > 0 {
		fmt.Fprintln(w, "RSS over time (MiB, every sample):")
		for _, s := range r.Series {
			fmt.Fprintf(w, "  %-18s", s.Process)
			for _, x := range s.Samples {
				fmt.Fprintf(w, " %.0f", float64(x.RSS)/(1<<20))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "flagged         %d\n", r.Flagged)
}
