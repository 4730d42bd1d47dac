package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/scripts/internal/harness"
	"github.com/worldgate/worldgate/shared/slowtest"
)

func TestMain(m *testing.M) {
	harness.RunRelayFromEnv() // the test binary is the floor's relay process
	os.Exit(m.Run())
}

// TestProcessesCompare runs a small -compare on the process stack: two stacks started in one
// invocation, the second with extra gate flags; each has a ceiling, a saturation and a
// half-rate phase of moves, every event committed, the pipeline's CPU read from its processes
// apart from bench's own, and hops per event counted on the streams. The second run's extra
// flag -log-level=info reaches the gate process (its "gates registered" line is in that run's
// process log only); once the gate binary has -fuse, the second run is also unfused and must
// take more hops per event than the first.
func TestProcessesCompare(t *testing.T) {
	slowtest.Skip(t, "end-to-end (two bench runs on the process stack)")
	dir := t.TempDir()
	// As many players as events: at half rate (open loop) no move is then sent before the
	// same player's previous one is decided, however loaded the machine.
	o, err := parse([]string{"-n", "200", "-players", "200", "-warmup", "50", "-ceiling-n", "2000", "-data-dir", dir, "-compare"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := harness.Build(ctx, o.binDir); err != nil {
		t.Fatal(err)
	}
	help, _ := exec.CommandContext(ctx, filepath.Join(o.binDir, "gate"), "-h").CombinedOutput()
	fuse := strings.Contains(string(help), "-fuse")
	o.compareFlags = []string{"-log-level=info"}
	if fuse {
		o.compareFlags = append(o.compareFlags, "-fuse=false")
	}
	t.Logf("gate binary has -fuse: %v; second run's gate flags %v", fuse, o.compareFlags)
	var progress bytes.Buffer
	fig, err := bench(ctx, o, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	printFigures(&out, fig)
	t.Logf("\n%s", out.String())

	if fig.Compare == nil || fig.Label != "fused" || fig.Compare.Label != "unfused" {
		t.Fatalf("want two runs labelled fused and unfused, got %q and %+v", fig.Label, fig.Compare)
	}
	if !slices.Equal(fig.Compare.GateFlags, o.compareFlags) || len(fig.GateFlags) != 0 {
		t.Errorf("gate flags: first run %v, second %v; want none, then %v", fig.GateFlags, fig.Compare.GateFlags, o.compareFlags)
	}
	for _, f := range []*Figures{fig, fig.Compare} {
		checkProcessRun(t, f, 200)
		if f.BinRevision == "" || f.BinRevision == "unknown" {
			t.Errorf("binaries built from %q: want the checkout's commit, so a before run can be told from an after one", f.BinRevision)
		}
	}
	for run, want := range map[string]bool{"fused": false, "unfused": true} {
		log, err := os.ReadFile(filepath.Join(dir, run, "processes.log"))
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(log, []byte(`"gates registered"`)); got != want { // the gate's own info line at start (gates.Start)
			t.Errorf("%s run: gate logged at info level: %v, want %v (the extra gate flag must reach the gate process of that run only)", run, got, want)
		}
	}
	if fuse {
		for i := range fig.Phases {
			if f, u := fig.Phases[i].HopsPerEvent, fig.Compare.Phases[i].HopsPerEvent; f >= u {
				t.Errorf("%s: %.2f hops per event fused, %.2f unfused: fusion must save hops", fig.Phases[i].Name, f, u)
			}
		}
	}
	checkFloor(t, fig)
	if fig.Compare.Floor != nil {
		t.Errorf("the floor ran twice: it does not depend on the gates' flags, once per invocation is enough")
	}
	for _, want := range []string{"pipeline alone", "in the kernel", "context switches per event", "hops per event", "one-hop ceiling", "carries over", "compare", "fused", "unfused", "peak RSS", "floor"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("figures lack %q", want)
		}
	}
}

// checkFloor asserts the floor beside each phase: every move through the relays, the CPU of the
// server and of each relay counted, and a backlog passing faster than moves sent at a rate.
func checkFloor(t *testing.T, f *Figures) {
	t.Helper()
	if len(f.Floor) != len(f.Phases) {
		t.Fatalf("floor runs %+v: want one beside each of the %d phases", f.Floor, len(f.Phases))
	}
	for i, r := range f.Floor {
		p := f.Phases[i]
		if r.Phase != p.Name || r.Moves != p.Events || r.StoredPerMove != 6 {
			t.Errorf("floor beside %s: %+v; want %d moves, 6 stored per move", p.Name, r, p.Events)
		}
		if want := p.CommittedPerS; p.TargetRate == 0 {
			if r.Rate != 0 {
				t.Errorf("floor beside saturation ran at %.0f/s: want a backlog (rate 0)", r.Rate)
			}
		} else if r.Rate != want {
			t.Errorf("floor beside %s ran at %.0f/s, want the phase's committed rate %.0f/s", p.Name, r.Rate, want)
		}
		if r.CPUMsPerMove <= 0 || r.SwitchesPerMove <= 0 || r.P50ms <= 0 || r.P99ms < r.P50ms || r.PerSecond <= 0 {
			t.Errorf("floor beside %s: implausible figures %+v", p.Name, r)
		}
		// A process's CPU comes from /proc in clock ticks (10 ms): a relay passing this test's
		// 200 moves may use less than one tick and read 0, so "it worked" is its context
		// switches; the CPU of the floor as a whole is checked above.
		for _, name := range []string{"nats", "ai-worker", "gates", "event-processor"} {
			if r.ProcessCPUMsPerMove[name] < 0 || r.ProcessSwitchesPerMove[name] <= 0 {
				t.Errorf("floor beside %s: %s used %.3f ms and switched %.1f times per move; every process of the floor works",
					p.Name, name, r.ProcessCPUMsPerMove[name], r.ProcessSwitchesPerMove[name])
			}
		}
	}
	if len(f.Floor) == 2 && f.Floor[0].PerSecond <= f.Floor[1].PerSecond {
		t.Errorf("floor: a backlog passed at %.0f moves/s, moves sent at %.0f/s at %.0f/s: a backlog must pass faster",
			f.Floor[0].PerSecond, f.Floor[1].Rate, f.Floor[1].PerSecond)
	}
}

// checkProcessRun asserts the figures of one run of moves on the process stack.
func checkProcessRun(t *testing.T, f *Figures, n int) {
	t.Helper()
	if f.CeilingPerS <= 0 || f.HopLimited != f.CeilingPerS/6 {
		t.Errorf("%s: ceiling %.0f/s, hop-limited %.0f/s: want a positive ceiling divided by the 6 hops of a move", f.Label, f.CeilingPerS, f.HopLimited)
	}
	if len(f.Phases) != 2 {
		t.Fatalf("%s: phases %+v, want saturation then half rate", f.Label, f.Phases)
	}
	for _, p := range f.Phases {
		if p.Committed != n || p.Rejected != 0 || p.Proposals != n {
			t.Errorf("%s %s: %d committed, %d rejected, %d proposals; want all %d moves committed", f.Label, p.Name, p.Committed, p.Rejected, p.Proposals, n)
		}
		if p.CommittedPerS <= 0 || p.P50ms <= 0 || p.P99ms < p.P50ms || p.CeilingShare <= 0 {
			t.Errorf("%s %s: implausible figures %+v", f.Label, p.Name, p)
		}
		if want := p.CommittedPerS / f.CeilingPerS; p.CeilingRatio != want || p.CeilingRatio >= 1 {
			t.Errorf("%s %s: ceiling ratio %.4f, want committed/s ÷ ceiling = %.4f (below 1)", f.Label, p.Name, p.CeilingRatio, want)
		}
		// A move costs the pipeline some CPU, and not a second of it.
		if p.PipelineCPUSeconds <= 0 || p.PipelineCPUMsPerEvent <= 0 || p.PipelineCPUMsPerEvent > 1000 || p.BenchCPUSeconds <= 0 || p.Restarts != 0 {
			t.Errorf("%s %s: pipeline CPU %.2fs (%.2f ms/event), bench CPU %.2fs, %d restarts", f.Label, p.Name, p.PipelineCPUSeconds, p.PipelineCPUMsPerEvent, p.BenchCPUSeconds, p.Restarts)
		}
		if diff := p.CPUSeconds - (p.PipelineCPUSeconds + p.BenchCPUSeconds); diff > 1e-9 || diff < -1e-9 {
			t.Errorf("%s %s: cpuSeconds %.3f is not the pipeline's %.3f plus bench's %.3f", f.Label, p.Name, p.CPUSeconds, p.PipelineCPUSeconds, p.BenchCPUSeconds)
		}
		// mcp-world is left out: world-rules caches its exits answers per location; so is the
		// memory-writer, which does not receive moves (their payloads name no NPC).
		for _, proc := range []string{"nats-1", "graphd", "gate-all", "event-processor", "ai-worker"} {
			if p.ProcessCPUSeconds[proc] <= 0 {
				t.Errorf("%s %s: %s used no CPU: %v", f.Label, p.Name, proc, p.ProcessCPUSeconds)
			}
		}
		// Every hop wakes the processes it crosses: each of them switched, some of the time in
		// the kernel (system time), and not all of it.
		if p.ContextSwitchesPerEvent <= 0 || p.PipelineKernelShare <= 0 || p.PipelineKernelShare >= 1 {
			t.Errorf("%s %s: %.1f context switches per event, %.2f of the CPU in the kernel", f.Label, p.Name, p.ContextSwitchesPerEvent, p.PipelineKernelShare)
		}
		var sum float64
		for _, proc := range []string{"nats-1", "graphd", "gate-all", "event-processor", "ai-worker"} {
			if p.ProcessSwitchesPerEvent[proc] <= 0 {
				t.Errorf("%s %s: %s never switched: %v", f.Label, p.Name, proc, p.ProcessSwitchesPerEvent)
			}
		}
		for _, c := range p.ProcessSwitchesPerEvent {
			sum += c
		}
		if d := sum - p.ContextSwitchesPerEvent; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s %s: %.2f context switches per event, but the processes' sum to %.2f", f.Label, p.Name, p.ContextSwitchesPerEvent, sum)
		}
		// Every event is one world event and one commit; the gates' hops lie between fully
		// fused (the agent's proposal, then validated: 2 hops and the commit) and the route's 6.
		if p.StreamMessages[events.StreamWorld] != uint64(n) || p.StreamMessages[events.StreamCommitted] != uint64(n) {
			t.Errorf("%s %s: stream messages %v, want %d on WORLD and on COMMITTED", f.Label, p.Name, p.StreamMessages, n)
		}
		if p.HopsPerEvent < 2 || p.HopsPerEvent > f.Hops {
			t.Errorf("%s %s: %.2f hops per event measured, want 2 to %g", f.Label, p.Name, p.HopsPerEvent, f.Hops)
		}
		// What a move stores (WORLD, PROPOSALS, AUDIT, COMMITTED, OUTCOMES, the rate window) and
		// what NATS receives for it (those publishes, the acknowledgements, bench's own): counted,
		// not guessed.
		var stored uint64
		for _, m := range p.StreamMessages {
			stored += m
		}
		if want := float64(stored) / float64(n); p.StoredPerEvent != want || p.StoredPerEvent < 5 || p.StreamMessages[rateStream] == 0 {
			t.Errorf("%s %s: %.2f stored per event (%v), want their sum ÷ events = %.2f, at least 5, the rate window among them", f.Label, p.Name, p.StoredPerEvent, p.StreamMessages, want)
		}
		if p.NATSInMsgsPerEvent < p.StoredPerEvent || p.NATSOutMsgsPerEvent < p.StoredPerEvent {
			t.Errorf("%s %s: NATS received %.1f and sent %.1f messages per event, fewer than the %.2f it stored", f.Label, p.Name, p.NATSInMsgsPerEvent, p.NATSOutMsgsPerEvent, p.StoredPerEvent)
		}
	}
	if f.Processors != 1 {
		t.Errorf("%s: %d event-processor replicas recorded, want the default 1", f.Label, f.Processors)
	}
	if f.PipelineCPUSeconds <= 0 || f.BenchCPUSeconds <= 0 || f.PeakRSSBytes <= 0 || f.ProcessPeakRSS["nats-1"] <= 0 || f.DeadLetters != 0 {
		t.Errorf("%s: pipeline CPU %.1fs, bench CPU %.1fs, peak RSS %d (%v), dead letters %d", f.Label, f.PipelineCPUSeconds, f.BenchCPUSeconds, f.PeakRSSBytes, f.ProcessPeakRSS, f.DeadLetters)
	}
}

// TestAIProposals runs the AI mix on the process stack: the pipeline's CPU per AI proposal is
// reported, and every npc dialogue and quest seed is a cache miss (the ai-worker's counters).
// With -profile every worker's CPU profile of the saturation phase is written.
func TestAIProposals(t *testing.T) {
	slowtest.Skip(t, "end-to-end (the AI mix on the process stack)")
	profiles := t.TempDir()
	fig := runBench(t, 6*time.Minute, "-mix", "ai", "-n", "20", "-players", "20", "-warmup", "4", "-half=false", "-ceiling-n", "0", "-data-dir", t.TempDir(),
		"-profile", profiles, "-profile-for", "1s")
	for _, w := range []string{"event-processor", "gate-all", "ai-worker", "memory-writer"} {
		b, err := os.ReadFile(filepath.Join(profiles, w+".pprof"))
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // a CPU profile is gzipped protobuf
			t.Errorf("%s: no CPU profile (%d bytes, %v)", w, len(b), err)
		}
	}
	if len(fig.Phases[0].Profiles) < 4 {
		t.Errorf("the phase lists %v as its profiles", fig.Phases[0].Profiles)
	}
	var out bytes.Buffer
	printFigures(&out, fig)
	t.Logf("\n%s", out.String())
	p := fig.Phases[0]
	if p.Proposals < p.Events || p.PipelineCPUMsPerProposal <= 0 || p.PipelineCPUMsPerProposal > p.PipelineCPUMsPerEvent {
		t.Errorf("%d proposals for %d events, %.2f ms of pipeline CPU per proposal, %.2f per event", p.Proposals, p.Events, p.PipelineCPUMsPerProposal, p.PipelineCPUMsPerEvent)
	}
	if p.AICache == nil || p.AICache.Hits != 0 || p.AICache.Misses < float64(p.Events) {
		t.Errorf("AI cache %+v over %d events: want every task a miss", p.AICache, p.Events)
	}
	if fig.Floor != nil {
		t.Errorf("the floor ran for the AI route: it models a move's route only")
	}
	if !strings.Contains(out.String(), "per proposal") || !strings.Contains(out.String(), "cache miss") {
		t.Errorf("figures lack the CPU per proposal or the cache verdict")
	}
}

// TestEmbedded runs a small bench on the embedded stack: the ceiling, a saturation phase and a
// half-rate phase of moves, every event committed, figures printed.
func TestEmbedded(t *testing.T) {
	slowtest.Skip(t, "end-to-end (a bench on the embedded stack)")
	fig := runBench(t, 2*time.Minute, "-stack", "embedded", "-n", "200", "-players", "200", "-warmup", "50", "-ceiling-n", "2000", "-data-dir", t.TempDir())
	if fig.CeilingPerS <= 0 || fig.HopLimited != fig.CeilingPerS/6 {
		t.Errorf("ceiling %.0f/s, hop-limited %.0f/s: want a positive ceiling divided by the 6 hops of a move", fig.CeilingPerS, fig.HopLimited)
	}
	if len(fig.Phases) != 2 {
		t.Fatalf("phases %+v, want saturation then half rate", fig.Phases)
	}
	for _, p := range fig.Phases {
		if p.Committed != 200 || p.Rejected != 0 {
			t.Errorf("%s: %d committed, %d rejected; want all 200 moves committed", p.Name, p.Committed, p.Rejected)
		}
		if p.CommittedPerS <= 0 || p.P50ms <= 0 || p.P99ms < p.P50ms || p.CeilingShare <= 0 || p.CeilingRatio <= 0 || p.CPUMsPerEvent <= 0 {
			t.Errorf("%s: implausible figures %+v", p.Name, p)
		}
		var names []string
		for _, st := range p.Stages {
			names = append(names, st.Name)
			if st.P99ms < st.P50ms {
				t.Errorf("%s: stage %+v", p.Name, st)
			}
		}
		if got, want := strings.Join(names, ", "), "agent, schema, invariant, rate, audit, to validated, commit"; got != want {
			t.Errorf("%s: stages %q, want a move's route %q", p.Name, got, want)
		}
		if p.PipelineCPUSeconds != 0 || p.HopsPerEvent < 2 || p.HopsPerEvent > 6 {
			t.Errorf("%s: pipeline CPU %.2fs (the embedded stack cannot tell it apart), %.2f hops per event", p.Name, p.PipelineCPUSeconds, p.HopsPerEvent)
		}
	}
	if want := fig.Phases[0].CommittedPerS / 2; fig.Phases[1].TargetRate != want {
		t.Errorf("half-rate phase ran at %.1f/s, want %.1f/s", fig.Phases[1].TargetRate, want)
	}
	if fig.DeadLetters != 0 || fig.PeakRSSBytes <= 0 || fig.CPUSeconds <= 0 || fig.Processors != 1 {
		t.Errorf("dead letters %d, peak RSS %d, CPU %.1fs, %d event-processors", fig.DeadLetters, fig.PeakRSSBytes, fig.CPUSeconds, fig.Processors)
	}
	var out bytes.Buffer
	printFigures(&out, fig)
	for _, want := range []string{"committed/s", "p99", "time per stage", "hop-limited ceiling", "one-hop ceiling", "peak RSS", "load generator and tracker included"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("figures lack %q:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

// TestParse refuses the combinations that would measure something else than asked.
func TestParse(t *testing.T) {
	for _, args := range [][]string{
		{"-compare", "-stack", "embedded"},
		{"-compare", "-nats-url", "nats://127.0.0.1:4222"},
		{"-cpuprofile", "cpu.out"},
		{"-stack", "embedded", "-profile", "p"},
		{"-compare", "-profile", "p"},
		{"-profile", "p", "-profile-for", "100ms"},
		{"-src", "/tmp/x", "-build=false"},
		{"-stack", "threads"},
		{"-processors", "0"},
		{"-processors", "2", "-stack", "embedded"},
		{"-processors", "2", "-nats-url", "nats://127.0.0.1:4222"},
	} {
		if _, err := parse(args, &bytes.Buffer{}); err == nil {
			t.Errorf("parse %v: want an error", args)
		}
	}
	o, err := parse([]string{"-compare"}, &bytes.Buffer{})
	if err != nil || o.stack != StackProcesses || !slices.Equal(o.compareFlags, []string{"-fuse=false"}) || o.binDir == "" || o.processors != 1 {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	if o, err := parse([]string{"-processors", "3"}, &bytes.Buffer{}); err != nil || o.processors != 3 {
		t.Errorf("-processors 3: %d processors, %v", o.processors, err)
	}
	if a, b := binDirFor(""), binDirFor("/tmp/wg-old"); a == b {
		t.Errorf("the current checkout and another share bin dir %s", a)
	}
}

// runBench parses args as bench's flags and runs one bench within timeout, failing the test
// with bench's progress output when it fails.
func runBench(t *testing.T, timeout time.Duration, args ...string) *Figures {
	t.Helper()
	o, err := parse(args, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var progress bytes.Buffer
	fig, err := bench(ctx, o, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	return fig
}

// The figures of a run with several event-processor replicas say how many ran, and their CPU
// summed beside each replica's.
func TestPrintProcessors(t *testing.T) {
	per := map[string]float64{"event-processor": 1.5, "event-processor-2": 1.25, "event-processor-3": 0.25, "gate-all": 4, "nats-1": 2}
	if got := processorCPU(per); got != 3 {
		t.Errorf("the replicas' CPU summed: %.2fs, want 3s", got)
	}
	f := &Figures{Processors: 3, Mix: harness.MixMoves, Phases: []Phase{{Name: "saturation", Events: 10, PipelineCPUSeconds: 8.75,
		ProcessCPUSeconds: per, ProcessorCPUSeconds: processorCPU(per)}}}
	var out bytes.Buffer
	printFigures(&out, f)
	for _, want := range []string{"processors      3 event-processor replicas", "the 3 event-processor replicas together 3.0s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("figures lack %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	f.Processors = 1
	printFigures(&out, f)
	if !strings.Contains(out.String(), "processors      1 event-processor replica\n") || strings.Contains(out.String(), "together") {
		t.Errorf("one replica:\n%s", out.String())
	}
}

// The AI figures tell answers apart (issue 41 item 2): new content, reused content, fallback,
// refused and skipped, with their shares, per proposal kind, and the model calls and cost per
// answered event, in the table and the JSON.
func TestPrintAnswers(t *testing.T) {
	a := harness.Answers{Answered: 10, Committed: 4, Reused: 3, Fallback: 1, Refused: 1, Skipped: 1, RefusedBy: map[string]int{"safety/SAFETY_FLAGGED": 1},
		ByKind: map[string]*harness.KindAnswers{"quest_seed": {Committed: 1, Reused: 3}, "npc_dialogue": {Committed: 3, Fallback: 1, Refused: 1}, "ambience": {Skipped: 1}}}
	s0 := &Spend{ModelCalls: 5, CostUSD: 0.001, ModelCallsByPurpose: map[string]float64{"quest_seed": 5}}
	s1 := &Spend{ModelCalls: 17, CostUSD: 0.003, ModelCallsByPurpose: map[string]float64{"quest_seed": 9, "npc_dialogue": 8}}
	sp := s1.since(s0, a.Answered)
	if sp.ModelCalls != 12 || sp.ModelCallsPerAnswered != 1.2 || sp.ModelCallsByPurpose["quest_seed"] != 4 || sp.CostUSDPerAnswered < 0.000199 || sp.CostUSDPerAnswered > 0.000201 {
		t.Fatalf("spend %+v", sp)
	}
	f := &Figures{Mix: harness.MixAI, Phases: []Phase{{Name: "saturation", Events: 10, Answers: a, AISpend: sp}}}
	var out bytes.Buffer
	printFigures(&out, f)
	for _, want := range []string{"4 (40%) committed new, 3 (30%) reused, 1 (10%) fallback, 1 (10%) refused map[safety/SAFETY_FLAGGED:1], 1 (10%) skipped",
		"answers by kind: ambience 0 new/0 reused/0 fallback/0 refused/1 skipped · npc_dialogue 3 new/0 reused/1 fallback/1 refused/0 skipped · quest_seed 1 new/3 reused/0 fallback/0 refused/0 skipped",
		"model calls 12 = 1.20 per answered event", "per answered event"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("figures lack %q:\n%s", want, out.String())
		}
	}
	raw, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"reused":3`, `"byKind":{`, `"modelCallsPerAnsweredEvent":1.2`, `"costUsdPerAnsweredEvent":`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the JSON lacks %s: %s", want, raw)
		}
	}
}
