package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
)

// With an OrderKey, the messages of one key reach the handler one at a time and in stream
// order, while different keys run at once.
func TestOrderKeyKeepsEachKeyInOrder(t *testing.T) {
	e := natstest.Start(t)
	app := newApp(t, e, prometheus.NewRegistry())
	var mu sync.Mutex
	seen := map[string][]int{}
	busy := map[string]bool{}
	overlapped, concurrent, running := false, 0, 0
	app.Handle("ordered", runtime.Consumer{
		Stream: events.StreamProposals, Subjects: []string{"proposals.gate.ordered"}, MaxAckPending: 64,
		OrderKey: func(_ string, data []byte) string { k, _, _ := strings.Cut(string(data), "/"); return k },
	}, func(m *message.Message) ([]*message.Message, error) {
		key, n, _ := strings.Cut(string(m.Payload), "/")
		var i int
		if _, err := fmt.Sscan(n, &i); err != nil {
			return nil, fmt.Errorf("payload %q: %w", m.Payload, err)
		}
		mu.Lock()
		if busy[key] {
			overlapped = true
		}
		busy[key] = true
		running++
		concurrent = max(concurrent, running)
		mu.Unlock()
		time.Sleep(time.Duration(i%3) * time.Millisecond) // later messages often finish first without the key order
		mu.Lock()
		busy[key] = false
		running--
		seen[key] = append(seen[key], i)
		mu.Unlock()
		return nil, nil
	})
	stop := runtimetest.Start(t, app)
	defer stop()
	const keys, per = 8, 40
	for i := range per {
		for k := range keys {
			publish(t, e, "proposals.gate.ordered", fmt.Sprintf("m-%d-%d", k, i), fmt.Sprintf("k%d/%d", k, i))
		}
	}
	natstest.WaitFor(t, 30*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range seen {
			n += len(v)
		}
		return n == keys*per
	})
	mu.Lock()
	defer mu.Unlock()
	if overlapped {
		t.Error("two messages of one key were handled at the same time")
	}
	for k, v := range seen {
		for i := range v {
			if v[i] != i {
				t.Fatalf("key %s handled in order %v, want 0…%d", k, v, per-1)
			}
		}
	}
	if concurrent < 2 {
		t.Errorf("at most %d message(s) ran at once: different keys should run concurrently", concurrent)
	}
}

// A message held by an instance that died (fetched, never acknowledged) comes back only after
// its ack wait; the replica that takes over must not handle the newer messages of its key
// before it. (The event-processor lost a location's exits this way: they were refused because
// the location, held by a SIGKILLed processor, did not exist yet.)
func TestOrderKeyHoldsAcrossACrash(t *testing.T) {
	e := natstest.Start(t)
	spec := runtime.Consumer{
		Stream: events.StreamProposals, Durable: "ordered", Subjects: []string{"proposals.gate.ordered"}, MaxAckPending: 64,
		AckWait:  time.Second,
		OrderKey: func(_ string, data []byte) string { k, _, _ := strings.Cut(string(data), "/"); return k },
	}
	for i := range 3 {
		publish(t, e, "proposals.gate.ordered", fmt.Sprintf("c-%d", i), fmt.Sprintf("k/%d", i))
	}
	// The instance that dies: the consumer as the runtime configures it, the first message
	// fetched and never acknowledged.
	if held := natstest.DieHolding(t, e.JS, spec.Stream, spec.ServerConfig()); string(held) != "k/0" {
		t.Fatalf("the dying instance fetched %q, want k/0", held)
	}

	if seen := handleAll(t, e, spec, 3); !slices.Equal(seen, []string{"k/0", "k/1", "k/2"}) {
		t.Fatalf("handled %v, want k/0 k/1 k/2: the newer messages overtook the one the dead instance held", seen)
	}
}

// handleAll starts a worker on spec, waits until it has handled n messages and returns their
// payloads in the order it handled them.
func handleAll(t *testing.T, e *natstest.Env, spec runtime.Consumer, n int) []string {
	t.Helper()
	app := newApp(t, e, prometheus.NewRegistry())
	var mu sync.Mutex
	var seen []string
	app.Handle("ordered", spec, func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		seen = append(seen, string(m.Payload))
		mu.Unlock()
		return nil, nil
	})
	stop := runtimetest.Start(t, app)
	defer stop()
	natstest.WaitFor(t, 15*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= n
	})
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(seen)
}

// A live worker keeps the messages it holds in progress, so a short ack wait (how soon a crashed
// worker's messages come back) does not redeliver a message whose handler, or whose turn behind
// an earlier message of its key, takes longer than the ack wait. Before, a message handled for
// longer than its ack wait was redelivered while it was still being handled, and the handler
// ran twice.
func TestHeldMessagesOutliveAShortAckWait(t *testing.T) {
	e := natstest.Start(t)
	app := newApp(t, e, prometheus.NewRegistry())
	const ackWait = 600 * time.Millisecond
	var mu sync.Mutex
	calls := map[string]int{}
	deliveries := map[string]string{}
	app.Handle("slow", runtime.Consumer{
		Stream: events.StreamProposals, Subjects: []string{"proposals.gate.slow"}, AckWait: ackWait,
		OrderKey: func(_ string, data []byte) string { k, _, _ := strings.Cut(string(data), "/"); return k },
	}, func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		calls[string(m.Payload)]++
		deliveries[string(m.Payload)] = m.Metadata.Get(runtime.MetaDeliveries)
		mu.Unlock()
		time.Sleep(3 * ackWait) // longer than the ack wait; the second message of k waits as long for its turn
		return nil, nil
	})
	stop := runtimetest.Start(t, app)
	defer stop()
	for i, body := range []string{"k/0", "k/1", "j/0"} {
		publish(t, e, "proposals.gate.slow", fmt.Sprintf("slow-%d", i), body)
	}
	natstest.WaitFor(t, 20*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) == 3
	})
	time.Sleep(3 * ackWait) // a redelivery would arrive by now
	mu.Lock()
	defer mu.Unlock()
	for body, n := range calls {
		if n != 1 || deliveries[body] != "1" {
			t.Errorf("%s: handled %d times, last on delivery %s; want once, on its first delivery", body, n, deliveries[body])
		}
	}
}

// A message of a key handed back for redelivery (its handler failed: a graph or NATS outage)
// keeps the later messages of its key waiting until it comes back and succeeds. Before, the
// later ones went ahead during its backoff, and a player's second move reached the graph before
// the first (chaos: hundreds of COMMIT_CONFLICT refusals after graphd was killed).
func TestOrderKeyWaitsForAHandedBackMessage(t *testing.T) {
	e := natstest.Start(t)
	app := newApp(t, e, prometheus.NewRegistry())
	var mu sync.Mutex
	var attempts, done []string
	failed := false
	app.Handle("ordered", runtime.Consumer{
		Stream: events.StreamProposals, Subjects: []string{"proposals.gate.ordered"}, AckWait: 2 * time.Second,
		Backoff:  []time.Duration{300 * time.Millisecond},
		OrderKey: func(_ string, data []byte) string { k, _, _ := strings.Cut(string(data), "/"); return k },
	}, func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, string(m.Payload))
		if string(m.Payload) == "k/0" && !failed {
			failed = true
			return nil, fmt.Errorf("the graph is down")
		}
		done = append(done, string(m.Payload))
		return nil, nil
	})
	stop := runtimetest.Start(t, app)
	defer stop()
	for i := range 3 {
		publish(t, e, "proposals.gate.ordered", fmt.Sprintf("h-%d", i), fmt.Sprintf("k/%d", i))
	}
	natstest.WaitFor(t, 15*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(done, []string{"k/0", "k/1", "k/2"}) || !slices.Equal(attempts, []string{"k/0", "k/0", "k/1", "k/2"}) {
		t.Fatalf("handled %v (attempts %v), want k/0 k/1 k/2 with k/0 tried twice first: the later messages overtook the one handed back", done, attempts)
	}
}

// A message handed back with a backoff longer than the ack wait, by a worker that then stops
// before the backoff has run out (gracefully, or by dying), still comes back before the later
// messages of its key. Before, JetStream held the redelivery for the backoff while the later
// messages were handed back at once (a graceful stop) or after their ack wait (a crash), and the
// next worker took them first: a player's later move overtook an earlier one, and with every
// gate in its own process chaos refused hundreds of moves with COMMIT_CONFLICT.
func TestOrderKeyHoldsWhenTheWorkerStopsDuringABackoff(t *testing.T) {
	for _, how := range []string{"stops", "dies"} {
		t.Run(how, func(t *testing.T) {
			e := natstest.Start(t)
			spec := runtime.Consumer{
				Stream: events.StreamProposals, Durable: "ordered", Subjects: []string{"proposals.gate.ordered"},
				AckWait: time.Second, Backoff: []time.Duration{4 * time.Second},
				OrderKey: func(_ string, data []byte) string { k, _, _ := strings.Cut(string(data), "/"); return k },
			}
			for i := range 3 {
				publish(t, e, "proposals.gate.ordered", fmt.Sprintf("b-%d", i), fmt.Sprintf("k/%d", i))
			}

			// The first worker, on a connection of its own: its handler fails k/0 (the graph
			// is down), and must not see k/1 or k/2 while k/0 waits out its backoff.
			nc, js, err := natsx.Connect(natsx.ConnConfig{URL: e.Server.ClientURL(), Name: "first"}, logx.Discard())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			first, err := runtime.New(runtime.Options{Name: "first", Conn: nc, JetStream: js, Registerer: prometheus.NewRegistry(),
				Logger: logx.Discard(), Retries: -1, CloseTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			failed := make(chan string, 3)
			first.Handle("ordered", spec, func(m *message.Message) ([]*message.Message, error) {
				failed <- string(m.Payload)
				return nil, errors.New("the graph is down")
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- first.Run(ctx) }()
			select {
			case got := <-failed:
				if got != "k/0" {
					t.Fatalf("the first worker's handler got %s first, want k/0", got)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the first worker handled nothing")
			}
			time.Sleep(500 * time.Millisecond) // k/0 is in its backoff, and the worker kept it in progress
			if how == "dies" {
				nc.Close() // nothing more reaches the server from this worker: as if it were killed
			}
			cancel()
			if err := <-done; err != nil {
				t.Logf("the first worker stopped: %v", err) // a dead connection may end it with an error
			}
			if len(failed) > 0 {
				t.Fatalf("the first worker handled %s during k/0's backoff", <-failed)
			}

			if seen := handleAll(t, e, spec, 3); !slices.Equal(seen, []string{"k/0", "k/1", "k/2"}) {
				t.Fatalf("the next worker handled %v, want k/0 k/1 k/2: the later messages overtook the one handed back", seen)
			}
		})
	}
}

// A consumer's pull requests ask for heartbeats every second and expire in ten: when the
// server no longer holds any of them (bench saw a burst leave a consumer with messages pending
// and no request), nats.go notices two missed heartbeats and asks again, 2 s later instead of
// the 30 s of its defaults.
func TestPullRequestsAskForFrequentHeartbeats(t *testing.T) {
	e := natstest.Start(t)
	reqs := make(chan *nats.Msg, 16)
	sub, err := e.Conn.ChanSubscribe("$JS.API.CONSUMER.MSG.NEXT."+events.StreamProposals+".beating", reqs)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	app := newApp(t, e, prometheus.NewRegistry())
	app.Handle("beating", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.beating"}},
		func(m *message.Message) ([]*message.Message, error) { return nil, nil })
	stop := runtimetest.Start(t, app)
	defer stop()
	select {
	case m := <-reqs:
		var req struct {
			Expires   time.Duration `json:"expires"`
			Heartbeat time.Duration `json:"idle_heartbeat"`
		}
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Fatal(err)
		}
		if req.Heartbeat != time.Second || req.Expires != 10*time.Second {
			t.Fatalf("pull request with heartbeat %v and expiry %v; want 1s and 10s (%s)", req.Heartbeat, req.Expires, m.Data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no pull request seen")
	}
}

// A message waiting for its turn behind earlier messages of its key is kept in progress for as
// long as it waits: MaxHold bounds a handler, not the queue. Before, a message that waited longer
// than MaxHold was no longer extended, JetStream redelivered it, and the copy joined the back of
// its key's queue and was handled a second time: after a flood, one player's moves queued behind
// such copies for 16 minutes.
func TestAMessageWaitingForItsTurnIsNotRedelivered(t *testing.T) {
	e := natstest.Start(t)
	app := newApp(t, e, prometheus.NewRegistry())
	var mu sync.Mutex
	handled := map[string]int{}
	app.Handle("queued", runtime.Consumer{
		Stream: events.StreamProposals, Subjects: []string{"proposals.gate.queued"},
		AckWait: 300 * time.Millisecond, MaxHold: 300 * time.Millisecond,
		OrderKey: func(string, []byte) string { return "one key" },
	}, func(m *message.Message) ([]*message.Message, error) {
		time.Sleep(150 * time.Millisecond) // well within MaxHold; the queue behind it is not
		mu.Lock()
		handled[string(m.Payload)]++
		mu.Unlock()
		return nil, nil
	})
	const n = 8 // the last waits about a second: three times its MaxHold
	for i := range n {
		publish(t, e, "proposals.gate.queued", fmt.Sprintf("q-%d", i), fmt.Sprintf("m%d", i))
	}
	stop := runtimetest.Start(t, app)
	defer stop()
	natstest.WaitFor(t, 20*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == n
	})
	time.Sleep(time.Second) // a redelivered copy would be handled within its ack wait
	mu.Lock()
	defer mu.Unlock()
	for msg, times := range handled {
		if times != 1 {
			t.Errorf("%s handled %d times, want once", msg, times)
		}
	}
}

// A worker that starts while another holds messages waits an ack wait for them; a message
// delivered to someone else during that wait (a replica that took the partition for a moment and
// died holding it) comes back only an ack wait after that delivery, so the wait lasts until then
// too. (Chaos: a player's move, delivered to a replica as it gave a partition up, came back 1 s
// after the next owner had taken the held ones and the player's later move.)
func TestOrderKeyWaitsForAMessageDeliveredElsewhereDuringTheWait(t *testing.T) {
	e := natstest.Start(t)
	spec := runtime.Consumer{
		Stream: events.StreamProposals, Durable: "ordered", Subjects: []string{"proposals.gate.ordered"}, MaxAckPending: 64,
		AckWait:  2 * time.Second,
		OrderKey: func(_ string, data []byte) string { k, _, _ := strings.Cut(string(data), "/"); return k },
	}
	publish(t, e, "proposals.gate.ordered", "w-0", "k/0")
	if held := natstest.DieHolding(t, e.JS, spec.Stream, spec.ServerConfig()); string(held) != "k/0" {
		t.Fatalf("the first dying instance fetched %q, want k/0", held)
	}
	done := make(chan []string, 1)
	go func() { done <- handleAll(t, e, spec, 3) }()
	time.Sleep(time.Second) // the worker waits for k/0
	publish(t, e, "proposals.gate.ordered", "w-1", "k/1")
	if held := natstest.DieHolding(t, e.JS, spec.Stream, spec.ServerConfig()); string(held) != "k/1" {
		t.Fatalf("the second dying instance fetched %q, want k/1", held)
	}
	publish(t, e, "proposals.gate.ordered", "w-2", "k/2")
	if seen := <-done; !slices.Equal(seen, []string{"k/0", "k/1", "k/2"}) {
		t.Fatalf("handled %v, want k/0 k/1 k/2: k/2 overtook k/1, delivered elsewhere while the worker waited", seen)
	}
}
