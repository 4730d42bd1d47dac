package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The floor is what a move's messages cost with no work at all: the same NATS server binary
// and the same hand-overs between processes as the pipeline, each relay doing nothing but
// what every worker does per message (consume from a durable pull consumer, publish with a
// message id and wait for JetStream's acknowledgement, acknowledge). What the pipeline costs
// above it is its work (decoding, checks, signatures, the graph); what the floor costs is the
// price of the architecture's hops on this machine, which no faster handler removes.
//
// A move's route, as the stack runs it with the gates fused:
//
//	bench → WORLD → ai-worker → PROPOSALS → gates → PROPOSALS (validated) → event-processor → COMMITTED
//	                                           └→ AUDIT                             └→ OUTCOMES
//
// FloorStages models it: three relays, the second and third publishing one side message each.
// Left out, so the floor is below the pipeline's true minimum: the graph's two round trips (the
// invariant gate's read, the processor's write), the rate gate's bucket requests, and bench's
// tracker reading outcomes.
var FloorStages = []FloorStage{{Name: "ai-worker"}, {Name: "gates", Side: 1}, {Name: "event-processor", Side: 1}}

// FloorStage is one relay of the floor: a process that forwards each message to the next stage
// and publishes Side more messages for it (an audit record, an outcome).
type FloorStage struct {
	Name string
	Side int
}

// relayEnv carries a relay's configuration to the process bench starts as that relay.
const relayEnv = "WORLDGATE_FLOOR_RELAY"

// floorSent is the header that carries when bench published a floor message (Unix nanoseconds).
const floorSent = "Floor-Sent"

// Floor is a NATS server and the relay processes of FloorStages, ready to run messages through.
type Floor struct {
	nats   *exec.Cmd
	relays []*exec.Cmd
	names  []string // "nats", then the stages' names
	nc     *nats.Conn
	js     jetstream.JetStream
	stored int // messages stored per move
	size   int
}

// FloorOptions configure StartFloor.
type FloorOptions struct {
	NATSBin string // the natsd binary (scripts/natsd), as the stack runs it
	// Self is the executable started as each relay; it must call RunRelayFromEnv first thing
	// (bench's main and its TestMain do).
	Self string
	Dir  string    // the server's store and its log
	Size int       // bytes per message; 0: 1500, about a move proposal with its trail
	Log  io.Writer // the processes' output; nil discards it
}

// StartFloor starts a NATS server with JetStream on its own store, the floor's streams and one
// relay process per stage.
func StartFloor(ctx context.Context, o FloorOptions) (f *Floor, err error) {
	if o.Size <= 0 {
		o.Size = 1500
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	f = &Floor{size: o.Size, names: []string{"nats"}}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	store := filepath.Join(o.Dir, "floor-nats")
	if err := os.MkdirAll(store, 0o755); err != nil {
		return nil, err
	}
	f.nats = exec.Command(o.NATSBin, "-port", strconv.Itoa(port), "-store", store)
	if err := startQuiet(f.nats, o.Log); err != nil {
		return nil, fmt.Errorf("floor: start natsd: %w", err)
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	if err := waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		return nil, fmt.Errorf("floor: natsd did not listen: %w", err)
	}
	if f.nc, err = nats.Connect(url, nats.Name("bench-floor")); err != nil {
		return nil, err
	}
	if f.js, err = jetstream.New(f.nc); err != nil {
		return nil, err
	}
	f.stored = len(FloorStages) + 1
	for i := range len(FloorStages) + 1 {
		if _, err := f.js.CreateStream(ctx, jetstream.StreamConfig{Name: floorStream(i), Subjects: []string{floorSubject(i)},
			Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
			return nil, fmt.Errorf("floor stream %d: %w", i, err)
		}
	}
	if _, err := f.js.CreateStream(ctx, jetstream.StreamConfig{Name: "FLOOR_SIDE", Subjects: []string{"floor.side.>"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
		return nil, fmt.Errorf("floor side stream: %w", err)
	}
	for i, s := range FloorStages {
		f.stored += s.Side
		if _, err := f.js.CreateOrUpdateConsumer(ctx, floorStream(i), jetstream.ConsumerConfig{Durable: "relay",
			AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1024, AckWait: 30 * time.Second}); err != nil {
			return nil, err
		}
		cmd := exec.Command(o.Self)
		cmd.Env = append(os.Environ(), relayEnv+"="+strings.Join([]string{url, strconv.Itoa(i), strconv.Itoa(s.Side)}, " "))
		if err := startQuiet(cmd, o.Log); err != nil {
			return nil, fmt.Errorf("floor: start relay %s: %w", s.Name, err)
		}
		f.relays = append(f.relays, cmd)
		f.names = append(f.names, s.Name)
	}
	return f, nil
}

func startQuiet(cmd *exec.Cmd, log io.Writer) error {
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group (a terminal's ^C reaches bench only, which stops it), and SIGTERM
	// when bench dies first, so no relay or server outlives the run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	return cmd.Start()
}

func floorStream(i int) string  { return "FLOOR_" + strconv.Itoa(i) }
func floorSubject(i int) string { return "floor." + strconv.Itoa(i) }

// Stop stops the relays and the server.
func (f *Floor) Stop() {
	if f.nc != nil {
		f.nc.Close()
	}
	for _, c := range append(slices.Clone(f.relays), f.nats) {
		if c != nil && c.Process != nil {
			_ = c.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = c.Process.Kill()
				<-done
			}
		}
	}
}

// FloorRun is what one run of the floor measured.
type FloorRun struct {
	Rate      float64 `json:"rate"` // target moves/s; 0: all sent at once
	Moves     int     `json:"moves"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"movesPerSecond"` // reached
	// CPUMsPerMove is the CPU of the server and the relays (utime + stime) over the run, per
	// move; by process in ProcessCPUMsPerMove.
	CPUMsPerMove        float64            `json:"cpuMsPerMove"`
	ProcessCPUMsPerMove map[string]float64 `json:"processCpuMsPerMove"`
	KernelShare         float64            `json:"kernelShare"`
	SwitchesPerMove     float64            `json:"contextSwitchesPerMove"`
	// ProcessSwitchesPerMove is SwitchesPerMove by process.
	ProcessSwitchesPerMove map[string]float64 `json:"processContextSwitchesPerMove"`
	StoredPerMove          int                `json:"storedPerMove"`
	P50ms                  float64            `json:"p50Ms"`
	P99ms                  float64            `json:"p99Ms"`
}

func (f *Floor) pids() []int {
	pids := []int{f.nats.Process.Pid}
	for _, r := range f.relays {
		pids = append(pids, r.Process.Pid)
	}
	return pids
}

func (f *Floor) read() (map[string]ProcStat, error) {
	out := map[string]ProcStat{}
	for i, pid := range f.pids() {
		s, err := ReadProc(pid)
		if err != nil {
			return nil, fmt.Errorf("floor: a process is gone: %w", err)
		}
		out[f.names[i]] = s
	}
	return out, nil
}

// Run sends n moves into the floor at rate moves/s (open loop, as bench's half-rate phase), or
// all at once when rate is 0 (a backlog, as bench's saturation phase keeps one), and waits until
// each has left the last relay. Run may be called again: each run's messages have ids of their
// own.
func (f *Floor) Run(ctx context.Context, rate float64, n int) (FloorRun, error) {
	r := FloorRun{Rate: rate, Moves: n, StoredPerMove: f.stored, ProcessCPUMsPerMove: map[string]float64{}, ProcessSwitchesPerMove: map[string]float64{}}
	last := len(FloorStages)
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	lat := make([]time.Duration, 0, n)
	var mu sync.Mutex
	arrived := make(chan struct{})
	var count atomic.Int64
	sub, err := f.nc.Subscribe(floorSubject(last), func(m *nats.Msg) {
		sent, err := strconv.ParseInt(m.Header.Get(floorSent), 10, 64)
		if err != nil || !strings.HasPrefix(m.Header.Get(nats.MsgIdHdr), strconv.Itoa(last)+"-"+tag+"-") {
			return // an earlier run's
		}
		mu.Lock()
		lat = append(lat, time.Since(time.Unix(0, sent)))
		mu.Unlock()
		if count.Add(1) == int64(n) {
			close(arrived)
		}
	})
	if err != nil {
		return r, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := f.nc.Flush(); err != nil {
		return r, err
	}
	payload := filler(f.size)
	s0, err := f.read()
	if err != nil {
		return r, err
	}
	start := time.Now()
	futures := make(chan jetstream.PubAckFuture, 4096)
	pubErr := awaitAcks(futures)
	for i := range n {
		if rate <= 0 {
			// a backlog: no pacing
		} else if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				close(futures)
				return r, ctx.Err()
			}
		}
		m := &nats.Msg{Subject: floorSubject(0), Data: payload, Header: nats.Header{}}
		m.Header.Set(floorSent, strconv.FormatInt(time.Now().UnixNano(), 10))
		fu, err := f.js.PublishMsgAsync(m, jetstream.WithMsgID("0-"+tag+"-"+strconv.Itoa(i)))
		if err != nil {
			close(futures)
			return r, fmt.Errorf("floor publish: %w", err)
		}
		futures <- fu
	}
	close(futures)
	if err := <-pubErr; err != nil {
		return r, fmt.Errorf("floor publish: %w", err)
	}
	select {
	case <-arrived:
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(2 * time.Minute):
		return r, fmt.Errorf("floor: %d of %d moves through after 2 minutes", count.Load(), n)
	}
	end := time.Now()
	// The last relay acknowledges after its publish is stored: let the acks land in the window.
	time.Sleep(200 * time.Millisecond)
	s1, err := f.read()
	if err != nil {
		return r, err
	}
	r.Seconds = end.Sub(start).Seconds()
	r.PerSecond = float64(n) / r.Seconds
	sp := Between(s0, s1)
	for name, cpu := range sp.ProcCPU {
		r.ProcessCPUMsPerMove[name] = 1000 * cpu.Seconds() / float64(n)
	}
	for name, sw := range sp.ProcSwitches {
		r.ProcessSwitchesPerMove[name] = float64(sw) / float64(n)
	}
	r.CPUMsPerMove = 1000 * sp.CPU.Seconds() / float64(n)
	r.KernelShare = sp.KernelShare()
	r.SwitchesPerMove = float64(sp.Switches) / float64(n)
	mu.Lock()
	r.P50ms, r.P99ms = Ms(Percentile(lat, 50)), Ms(Percentile(lat, 99))
	mu.Unlock()
	return r, nil
}

// RunRelayFromEnv runs this process as a relay of the floor when StartFloor started it as one,
// and then exits; otherwise it returns at once. Call it first thing in main (and TestMain).
func RunRelayFromEnv() {
	cfg, ok := os.LookupEnv(relayEnv)
	if !ok {
		return
	}
	if err := relay(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "floor relay:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// relay forwards each message of its stage's stream to the next stage's, publishes its side
// messages, and acknowledges once JetStream has acknowledged every publish — on one goroutine per
// message, as the runtime's workers do — until SIGTERM.
func relay(cfg string) error {
	f := strings.Fields(cfg)
	if len(f) != 3 {
		return fmt.Errorf("%s=%q: want url stage side", relayEnv, cfg)
	}
	stage, err1 := strconv.Atoi(f[1])
	side, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	nc, err := nats.Connect(f[0], nats.Name("floor-"+f[1]))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx := context.Background()
	cons, err := js.Consumer(ctx, floorStream(stage), "relay")
	if err != nil {
		return err
	}
	next, nextID := floorSubject(stage+1), strconv.Itoa(stage+1)+"-"
	cc, err := cons.Consume(func(m jetstream.Msg) {
		go func() {
			id := strings.SplitN(m.Headers().Get(nats.MsgIdHdr), "-", 2)
			if len(id) != 2 {
				_ = m.Term()
				return
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			out := &nats.Msg{Subject: next, Data: m.Data(), Header: nats.Header{floorSent: m.Headers()[floorSent]}}
			if _, err := js.PublishMsg(pctx, out, jetstream.WithMsgID(nextID+id[1])); err != nil {
				_ = m.Nak()
				return
			}
			for s := range side {
				subj := "floor.side." + strconv.Itoa(stage) + "." + strconv.Itoa(s)
				if _, err := js.PublishMsg(pctx, &nats.Msg{Subject: subj, Data: m.Data()[:min(len(m.Data()), 400)]},
					jetstream.WithMsgID(subj+"-"+id[1])); err != nil {
					_ = m.Nak()
					return
				}
			}
			_ = m.Ack()
		}()
	}, jetstream.PullMaxMessages(256), jetstream.PullExpiry(10*time.Second), jetstream.PullHeartbeat(time.Second))
	if err != nil {
		return err
	}
	defer cc.Stop()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	return nil
}
