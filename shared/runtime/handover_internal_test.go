package runtime

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// A panic in the wrapping around a handler (outside the recoverer, which only its handler
// runs inside) is a failed delivery: the message comes back and is handled, and the worker
// lives on. Without handleSafely the pool's goroutine swallows the panic and the message is
// never settled: nothing more happens to it until its hold time runs out.
func TestAPanicAroundTheHandlerIsRedelivered(t *testing.T) {
	e := natstest.Start(t)
	app, err := New(Options{Name: "test", Conn: e.Conn, JetStream: e.JS, Registerer: prometheus.NewRegistry(), Logger: logx.Discard(), Retries: -1, CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	app.Handle("wrapped", Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.wrapped"}, Backoff: []time.Duration{10 * time.Millisecond}},
		func(m *message.Message) ([]*message.Message, error) {
			return []*message.Message{NewMessage("proposals.gate.after", "after:"+m.UUID, m.Payload)}, nil
		})
	var calls atomic.Int32
	chain := app.chains[0]
	app.chains[0] = func(m *message.Message) error {
		if calls.Add(1) == 1 {
			panic("a middleware broke")
		}
		return chain(m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if _, err := e.JS.Publish(context.Background(), "proposals.gate.wrapped", []byte("x"), jetstream.WithMsgID("m1")); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 10*time.Second, "output after the panic", func() bool {
		return natstest.StreamMsgs(t, e.JS, events.StreamProposals, "proposals.gate.after") == 1
	})
	if n := calls.Load(); n != 2 {
		t.Fatalf("handled %d times, want 2 (the panic, then the redelivery)", n)
	}
}
