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
	srv, err := net.Dial("tcp", p.server)
	if err != nil {
		_ = client.Close()
		return
	}
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

// A second failure while an ordered consumer holds its messages for one lost on the way (here
// the server restarting on its data) must not let the held message go before the lost one.
func TestOrderKeyHoldsPastASecondFailureDuringTheHold(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	e := natstest.StartOn(t, dir, port)
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
	e.Stop() // the second failure, while the second move is held
	e = natstest.StartOn(t, dir, port)
	natstest.WaitFor(t, 4*ackWait+5*time.Second, "both moves handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 3 })
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"warm/0", "player-7/first-move", "player-7/second-move"}; !slices.Equal(seen, want) {
		t.Fatalf("handled %q, want %q: the second move overtook the first, lost on the way, after a second failure during the hold", seen, want)
	}
}
