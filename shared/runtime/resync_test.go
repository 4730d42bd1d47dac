package runtime_test

import (
	"bytes"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
)

// cuttingProxy is a TCP proxy between a NATS client and its server that, once armed, drops
// the first bytes from the server containing marker and cuts the connection: a delivery lost
// on the way, as when a NATS node dies with a message on the wire.
type cuttingProxy struct {
	ln     net.Listener
	server string
	marker atomic.Pointer[[]byte]
	cuts   atomic.Int32
	down   atomic.Bool // refuse connections, as a dead NATS node does

	mu    sync.Mutex
	conns map[net.Conn]bool
}

// cutAll cuts every connection through the proxy (a NATS node dies); with down set first, the
// client cannot reconnect until down is cleared.
func (p *cuttingProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

func startCuttingProxy(t *testing.T, server string) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttingProxy{ln: ln, server: strings.TrimPrefix(server, "nats://")}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *cuttingProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *cuttingProxy) serve(client net.Conn) {
	if p.down.Load() {
		_ = client.Close()
		return
	}
	srv, err := net.Dial("tcp", p.server)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.conns == nil {
		p.conns = map[net.Conn]bool{}
	}
	p.conns[client] = true
	p.mu.Unlock()
	defer func() { p.mu.Lock(); delete(p.conns, client); p.mu.Unlock() }()
	var once sync.Once
	cut := func() { once.Do(func() { _ = client.Close(); _ = srv.Close() }) }
	go func() { _, _ = io.Copy(srv, client); cut() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := srv.Read(buf)
		if n > 0 {
			if m := p.marker.Load(); m != nil && bytes.Contains(buf[:n], *m) && p.marker.CompareAndSwap(m, nil) {
				p.cuts.Add(1)
				cut()
				return
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				cut()
				return
			}
		}
		if err != nil {
			cut()
			return
		}
	}
}

// A message delivered to an ordered consumer but lost on the way (the connection dropped) is
// redelivered only after its ack wait; the next message of its key, delivered at once after the
// reconnect, must still wait for it. (Chaos saw a player's second move pass the rate gate and
// commit before the first, lost when a NATS node died.)
func TestOrderKeyHoldsWhenADeliveryIsLostOnTheWay(t *testing.T) {
	e := natstest.Start(t)
	proxy := startCuttingProxy(t, e.Server.ClientURL())
	nc, err := nats.Connect(proxy.URL(), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1), nats.ReconnectJitter(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	app, err := runtime.New(runtime.Options{Name: "test", Conn: nc, JetStream: js, Registerer: prometheus.NewRegistry(), Logger: logx.Discard(), Retries: -1, CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	app.Handle("lossy", runtime.Consumer{
		Stream: events.StreamProposals, Subjects: []string{"proposals.gate.lossy"}, AckWait: 2 * time.Second,
		OrderKey: func(_ string, data []byte) string { k, _, _ := strings.Cut(string(data), "/"); return k },
	}, func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		seen = append(seen, string(m.Payload))
		mu.Unlock()
		return nil, nil
	})
	stop := runtimetest.Start(t, app)
	defer stop()
	// A first message shows the consumer is pulling.
	publish(t, e, "proposals.gate.lossy", "warm", "warm/0")
	natstest.WaitFor(t, 10*time.Second, "the first message handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 1 })

	marker := []byte("player-7/first-move")
	proxy.marker.Store(&marker)
	publish(t, e, "proposals.gate.lossy", "first", string(marker))
	natstest.WaitFor(t, 10*time.Second, "the first move lost on the way and the client reconnected", func() bool {
		return proxy.cuts.Load() == 1 && nc.IsConnected() && nc.Stats().Reconnects >= 1
	})
	publish(t, e, "proposals.gate.lossy", "second", "player-7/second-move")
	natstest.WaitFor(t, 15*time.Second, "both moves handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 3 })
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"warm/0", "player-7/first-move", "player-7/second-move"}; !slices.Equal(seen, want) {
		t.Fatalf("handled %q, want %q: the second move overtook the first, lost on the way", seen, want)
	}
}

// A second failure while an ordered consumer holds its messages for one lost on the way can
// delay the lost one's redelivery past the hold: the connection stays down through the server's
// ack wait, so the redelivery comes only after the reconnect. The hold must last while the
// connection is down and an ack wait past the reconnect. (Chaos saw a partition hold a player's
// second move for its ack wait after a NATS node died, a second node die in between, and the
// first move's redelivery come 1.3 s after the hold ended: the second move committed first.)
func TestOrderKeyHoldsPastASecondFailureDuringTheHold(t *testing.T) {
	e := natstest.Start(t)
	proxy := startCuttingProxy(t, e.Server.ClientURL())
	nc, err := nats.Connect(proxy.URL(), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1), nats.ReconnectJitter(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	app, err := runtime.New(runtime.Options{Name: "test", Conn: nc, JetStream: js, Registerer: prometheus.NewRegistry(), Logger: logx.Discard(), Retries: -1, CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const ackWait = 2 * time.Second
	var mu sync.Mutex
	var seen []string
	app.Handle("lossy", runtime.Consumer{
		Stream: events.StreamProposals, Subjects: []string{"proposals.gate.lossy"}, AckWait: ackWait,
		OrderKey: func(_ string, data []byte) string { k, _, _ := strings.Cut(string(data), "/"); return k },
	}, func(m *message.Message) ([]*message.Message, error) {
		mu.Lock()
		seen = append(seen, string(m.Payload))
		mu.Unlock()
		return nil, nil
	})
	stop := runtimetest.Start(t, app)
	defer stop()
	publish(t, e, "proposals.gate.lossy", "warm", "warm/0")
	natstest.WaitFor(t, 10*time.Second, "the first message handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 1 })

	marker := []byte("player-7/first-move")
	proxy.marker.Store(&marker)
	publish(t, e, "proposals.gate.lossy", "first", string(marker))
	natstest.WaitFor(t, 10*time.Second, "the first move lost on the way and the client reconnected", func() bool {
		return proxy.cuts.Load() == 1 && nc.IsConnected() && nc.Stats().Reconnects >= 1
	})
	publish(t, e, "proposals.gate.lossy", "second", "player-7/second-move") // held: a delivery may have been lost
	time.Sleep(ackWait / 2)
	// The second failure: the connection down through the first move's ack wait and past the
	// hold's end.
	proxy.down.Store(true)
	proxy.cutAll()
	time.Sleep(ackWait + ackWait/2)
	mu.Lock()
	early := slices.Clone(seen)
	mu.Unlock()
	proxy.down.Store(false)
	deadline := time.Now().Add(4*ackWait + 5*time.Second)
	for {
		mu.Lock()
		both := slices.Contains(seen, "player-7/first-move") && slices.Contains(seen, "player-7/second-move")
		mu.Unlock()
		if both {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("handled %q (%q while the connection was down); connected %v after %d reconnects: want both moves handled", seen, early, nc.IsConnected(), nc.Stats().Reconnects)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	// The second move, held in progress through the outage, may be handled twice (its ack wait
	// ran out on the server meanwhile): at least once, never before the first.
	if first, second := slices.Index(seen, "player-7/first-move"), slices.Index(seen, "player-7/second-move"); second < first {
		t.Fatalf("handled %q (%q while the connection was down): the second move overtook the first, lost on the way, after a second failure during the hold", seen, early)
	}
}
