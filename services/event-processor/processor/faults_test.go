package processor_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/shared/logx"

	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// The processor as its own process, killed with SIGKILL at random moments at least ten times
// while it works, and restarted: the graph and the committed log come out exactly as without
// the crashes.
func TestSIGKILLedProcessLeavesExactResult(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a process")
	}
	bin := filepath.Join(t.TempDir(), "event-processor")
	build := exec.Command("go", "build", "-o", bin, "..")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build the event-processor: %v", err)
	}
	e := natstest.Start(t)
	gd := graphdtest.Start(t)
	keyDir := t.TempDir()
	if err := keys.WritePublic(keyDir); err != nil {
		t.Fatal(err)
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "-nats-url", e.Server.ClientURL(), "-graph-url", gd.URL(), "-attest-keys", keyDir,
			"-graph-user", graphdtest.WriterUser, "-graph-password", graphdtest.WriterPassword,
			"-admin", "127.0.0.1:0", "-ack-wait", "1s", "-log-level", "error")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	w := newWorkload("k", 2000)
	ps, ids := withDuplicates(w)
	publishAsync(t, e.JS, ps, ids)

	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	cmd := start()
	kills := 0
	for kills < 10 {
		// Let it make some progress, then kill it at a random moment.
		before := committed(t, e)
		natstest.WaitFor(t, 20*time.Second, "progress after a restart", func() bool { return committed(t, e) > before })
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond) // a random kill moment, not a wait for work
		if committed(t, e) >= uint64(len(w.proposals)) {
			t.Fatalf("the run finished after only %d kills: make the workload larger", kills)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		kills++
		cmd = start()
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// After ten kills a message may have been delivered ten times, so its next redelivery waits
	// the longest backoff (10 s) before the actor's ordered chain moves on: allow for a few of
	// those on a busy machine.
	natstest.WaitFor(t, 90*time.Second, "every proposal committed after the crashes", func() bool {
		return committed(t, e) >= uint64(len(w.proposals)) && settled(t, e)
	})
	t.Logf("%d SIGKILLs", kills)
	verify(t, e, reader(t, gd.URL()), w)
}

// graphd stops mid-run and comes back on the same data directory: the processor reports not
// ready meanwhile, loses nothing, duplicates nothing, and resumes by itself.
func TestGraphOutageLosesNothing(t *testing.T) {
	e := natstest.Start(t)
	dir := t.TempDir()
	gd := graphdtest.Start(t, graphdtest.WithDataDir(dir))
	addr := gd.Addr()
	p := runProcessor(t, e, writer(t, gd.URL()), prometheus.NewRegistry())
	w := newWorkload("o", 1000)
	publishAsync(t, e.JS, w.proposals, func(i int) string { return w.proposals[i].ProposalID })
	natstest.WaitFor(t, 20*time.Second, "some commits", func() bool { return committed(t, e) > 100 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := gd.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	natstest.WaitFor(t, 10*time.Second, "readiness false while the graph is down", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return p.Ready(ctx) != nil
	})
	stalled := committed(t, e)
	if stalled >= uint64(len(w.proposals)) {
		t.Fatal("the run finished before the outage")
	}
	// Several delivery attempts fail while it is down; none may be dead-lettered.
	natstest.WaitFor(t, 10*time.Second, "redeliveries during the outage", func() bool {
		for _, info := range processorConsumers(t, e) {
			if info.NumRedelivered > 0 {
				return true
			}
		}
		return false
	})

	restartGraphd(t, addr, dir)
	natstest.WaitFor(t, 10*time.Second, "ready again", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return p.Ready(ctx) == nil
	})
	natstest.WaitFor(t, 60*time.Second, "every proposal committed after the outage", func() bool {
		return committed(t, e) >= uint64(len(w.proposals)) && settled(t, e)
	})
	verify(t, e, reader(t, graphURL(addr)), w)
}

func graphURL(addr string) string { return "ws://" + addr + "/gremlin" }

// A processor that crashed holding a proposal (a location) hands it back only after its ack
// wait; the next processor must not apply the proposals behind it (exits from that location)
// first, or they are refused for good because the location does not exist yet. Found by
// TestSIGKILLedProcessLeavesExactResult, which lost the exits of a location whose proposal a
// killed processor held. (The runtime's order key holds across the crash: a consumer that
// finds messages held elsewhere at its start lets them come back first.)
func TestProposalHeldByACrashedProcessorIsNotOvertaken(t *testing.T) {
	e := natstest.Start(t)
	gd := graphdtest.Start(t)
	ctx := context.Background()
	const ackWait = time.Second
	withAckWait := func(d *processor.Deps) { d.AckWait = ackWait }
	// The crashed processor: the processor's own durable consumer, one proposal fetched and
	// never acknowledged.
	proto, err := processor.New(processor.Deps{Graph: writer(t, gd.URL()), Keyring: keys.Ring, Registerer: prometheus.NewRegistry(),
		Logger: logx.Discard(), AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := e.JS.CreateOrUpdateConsumer(ctx, events.StreamProposals, proto.Consumer().ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	ps := []*events.Proposal{
		proposal(events.KindLocationCreated, "h-1", map[string]any{"locationId": "loc:h-1", "name": "Hall", "description": "Held."}),
		proposal(events.KindLocationCreated, "h-2", map[string]any{"locationId": "loc:h-2", "name": "Yard", "description": "Open."}),
		proposal(events.KindExitAdded, "h-3", map[string]any{"fromLocationId": "loc:h-1", "toLocationId": "loc:h-2", "direction": "east"}),
		proposal(events.KindExitAdded, "h-4", map[string]any{"fromLocationId": "loc:h-2", "toLocationId": "loc:h-1", "direction": "west"}),
	}
	for _, p := range ps {
		publish(t, e.JS, p, p.ProposalID)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for m := range batch.Messages() {
		if !strings.Contains(string(m.Data()), `"h-1"`) {
			t.Fatalf("the crashed processor fetched %s, want the first proposal", m.Subject())
		}
		held++
	}
	if held != 1 {
		t.Fatalf("the crashed processor holds %d proposals, want 1", held)
	}

	runProcessor(t, e, writer(t, gd.URL()), prometheus.NewRegistry(), withAckWait)
	natstest.WaitFor(t, 30*time.Second, "every proposal decided", func() bool {
		return committed(t, e)+rejected(t, e) >= uint64(len(ps)) && settled(t, e)
	})
	if n := rejected(t, e); n != 0 {
		t.Fatalf("%d proposals refused: the exits overtook the location a crashed processor held", n)
	}
	if n := committed(t, e); n != uint64(len(ps)) {
		t.Fatalf("%d committed, want %d", n, len(ps))
	}
}
