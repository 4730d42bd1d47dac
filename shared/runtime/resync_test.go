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

// lossy is an ordered consumer (key: what precedes "/" in the body) reached through a cutting
// proxy, which has handled a first message and then lost player-7's first move on the way: the
// client reconnected, and the move waits for its ack wait on the server.
type lossy struct {
	e     *natstest.Env
	proxy *cuttingProxy
	nc    *nats.Conn
	mu    sync.Mutex
	seen  []string
}

func startLossy(t *testing.T, ackWait time.Duration) *lossy {
	t.Helper()
	l := &lossy{e: natstest.Start(t)}
	l.proxy = startCuttingProxy(t, l.e.Server.ClientURL())
	nc, err := nats.Connect(l.proxy.URL(), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1), nats.ReconnectJitter(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	app, err := runtime.New(runtime.Options{Name: "test", Conn: nc, JetStream: js, Registerer: prometheus.NewRegistry(), Logger: logx.Discard(), Retries: -1, CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	app.Handle("lossy", runtime.Consumer{
		Stream: events.StreamProposals, Subjects: []string{"proposals.gate.lossy"}, AckWait: ackWait,
		OrderKey: func(_ string, data []byte) string { k, _, _ := strings.Cut(string(data), "/"); return k },
	}, func(m *message.Message) ([]*message.Message, error) {
		l.mu.Lock()
		l.seen = append(l.seen, string(m.Payload))
		l.mu.Unlock()
		return nil, nil
	})
	t.Cleanup(runtimetest.Start(t, app))
	// A first message shows the consumer is pulling.
	publish(t, l.e, "proposals.gate.lossy", "warm", "warm/0")
	natstest.WaitFor(t, 10*time.Second, "the first message handled", func() bool { return len(l.handled()) == 1 })
	marker := []byte("player-7/first-move")
	l.proxy.marker.Store(&marker)
	publish(t, l.e, "proposals.gate.lossy", "first", string(marker))
	natstest.WaitFor(t, 10*time.Second, "the first move lost on the way and the client reconnected", func() bool {
		return l.proxy.cuts.Load() == 1 && nc.IsConnected() && nc.Stats().Reconnects >= 1
	})
	return l
}

// handled is what the handler has seen, in order.
func (l *lossy) handled() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// A message delivered to an ordered consumer but lost on the way (the connection dropped) is
// redelivered only after its ack wait; the next message of its key, delivered at once after the
// reconnect, must still wait for it. (Chaos saw a player's second move pass the rate gate and
// commit before the first, lost when a NATS node died.)
func TestOrderKeyHoldsWhenADeliveryIsLostOnTheWay(t *testing.T) {
	l := startLossy(t, 2*time.Second)
	publish(t, l.e, "proposals.gate.lossy", "second", "player-7/second-move")
	natstest.WaitFor(t, 15*time.Second, "both moves handled", func() bool { return len(l.handled()) == 3 })
	if seen, want := l.handled(), []string{"warm/0", "player-7/first-move", "player-7/second-move"}; !slices.Equal(seen, want) {
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
	const ackWait = 2 * time.Second
	l := startLossy(t, ackWait)
	publish(t, l.e, "proposals.gate.lossy", "second", "player-7/second-move") // held: a delivery may have been lost
	time.Sleep(ackWait / 2)
	// The second failure: the connection down through the first move's ack wait and past the
	// hold's end.
	l.proxy.down.Store(true)
	l.proxy.cutAll()
	time.Sleep(ackWait + ackWait/2)
	early := l.handled()
	l.proxy.down.Store(false)
	natstest.WaitFor(t, 4*ackWait+5*time.Second, "both moves handled", func() bool {
		seen := l.handled()
		return slices.Contains(seen, "player-7/first-move") && slices.Contains(seen, "player-7/second-move")
	})
	// The second move, held in progress through the outage, may be handled twice (its ack wait
	// ran out on the server meanwhile): at least once, never before the first.
	seen := l.handled()
	if first, second := slices.Index(seen, "player-7/first-move"), slices.Index(seen, "player-7/second-move"); second < first {
		t.Fatalf("handled %q (%q while the connection was down): the second move overtook the first, lost on the way, after a second failure during the hold", seen, early)
	}
}
