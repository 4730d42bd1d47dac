package runtime_test

import (
	"context"
	"errors"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
)

func newApp(t *testing.T, e *natstest.Env, reg *prometheus.Registry) *runtime.App {
	t.Helper()
	app, err := runtime.New(runtime.Options{Name: "test", Conn: e.Conn, JetStream: e.JS, Registerer: reg, Logger: logx.Discard(), Retries: -1, CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func publish(t *testing.T, e *natstest.Env, subject, id, body string) {
	t.Helper()
	msg := &nats.Msg{Subject: subject, Data: []byte(body), Header: nats.Header{}}
	msg.Header.Set(events.HeaderCorrelationID, "corr-"+id)
	if _, err := e.JS.PublishMsg(context.Background(), msg, jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
}

func lastMsg(t *testing.T, e *natstest.Env, stream, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := e.JS.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), subject)
	if err != nil {
		t.Fatalf("no message on %s: %v", subject, err)
	}
	return m
}

func consumerSettled(t *testing.T, e *natstest.Env, durable string) func() bool {
	return func() bool {
		c, err := e.JS.Consumer(context.Background(), events.StreamProposals, durable)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.AckFloor.Stream > 0
	}
}

func TestHandlerOutputIsPublishedWithCorrelationBeforeAck(t *testing.T) {
	e := natstest.Start(t)
	app := newApp(t, e, prometheus.NewRegistry())
	app.Handle("upper", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.in"}},
		func(m *message.Message) ([]*message.Message, error) {
			return []*message.Message{runtime.NewMessage("proposals.gate.out", "out:"+m.UUID, []byte(strings.ToUpper(string(m.Payload))))}, nil
		})
	stop := runtimetest.Start(t, app)
	defer stop()
	publish(t, e, "proposals.gate.in", "m1", "hello")
	natstest.WaitFor(t, 5*time.Second, "output", func() bool { return natstest.StreamMsgs(t, e.JS, events.StreamProposals, "proposals.gate.out") == 1 })
	out := lastMsg(t, e, events.StreamProposals, "proposals.gate.out")
	if string(out.Data) != "HELLO" || out.Header.Get(events.HeaderCorrelationID) != "corr-m1" || out.Header.Get(events.HeaderCausationID) != "m1" {
		t.Fatalf("output %q headers %v", out.Data, out.Header)
	}
	natstest.WaitFor(t, 5*time.Second, "input acked", consumerSettled(t, e, "upper"))
}

func TestFailingHandlerIsRedeliveredThenDeadLettered(t *testing.T) {
	e := natstest.Start(t)
	reg := prometheus.NewRegistry()
	app := newApp(t, e, reg)
	var calls atomic.Int32
	app.Handle("flaky", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.flaky"},
		MaxDeliver: 3, Backoff: []time.Duration{20 * time.Millisecond}},
		func(m *message.Message) ([]*message.Message, error) {
			calls.Add(1)
			return nil, errors.New("the graph is unreachable")
		})
	stop := runtimetest.Start(t, app)
	defer stop()
	publish(t, e, "proposals.gate.flaky", "m1", "payload")
	natstest.WaitFor(t, 10*time.Second, "dead letter", func() bool { return natstest.StreamMsgs(t, e.JS, events.StreamDLQ, "") == 1 })
	dl := lastMsg(t, e, events.StreamDLQ, events.DeadLetterSubject("flaky"))
	h := dl.Header
	if h.Get(events.HeaderDLQStage) != "flaky" || !strings.Contains(h.Get(events.HeaderDLQReason), "graph is unreachable") ||
		h.Get(events.HeaderDLQDeliveries) != "3" || h.Get(events.HeaderDLQSubject) != "proposals.gate.flaky" ||
		h.Get(events.HeaderCorrelationID) != "corr-m1" || string(dl.Data) != "payload" {
		t.Fatalf("dead letter headers %v body %q", h, dl.Data)
	}
	natstest.WaitFor(t, 5*time.Second, "input acked after dead-lettering", consumerSettled(t, e, "flaky"))
	if calls.Load() != 3 {
		t.Fatalf("handler ran %d times, want 3 (the delivery limit)", calls.Load())
	}
	if got := metricstest.Sum(t, reg, "worldgate_deadletter_total", nil); got != 1 {
		t.Fatalf("deadletter_total = %v", got)
	}
}

// A Later error hands the message back for a later delivery without counting as a failure: no
// in-process retry, the "later" outcome instead of "error", and the next delivery decides.
func TestLaterIsNotAFailure(t *testing.T) {
	e := natstest.Start(t)
	reg := prometheus.NewRegistry()
	app, err := runtime.New(runtime.Options{Name: "test", Conn: e.Conn, JetStream: e.JS, Registerer: reg, Logger: logx.Discard(), Retries: 2, CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	app.Handle("waits", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.waits"},
		MaxDeliver: 5, Backoff: []time.Duration{50 * time.Millisecond}},
		func(m *message.Message) ([]*message.Message, error) {
			if calls.Add(1) == 1 {
				return nil, runtime.Later(errors.New("the previous move has not committed yet"))
			}
			return nil, nil
		})
	stop := runtimetest.Start(t, app)
	defer stop()
	publish(t, e, "proposals.gate.waits", "w1", "payload")
	natstest.WaitFor(t, 10*time.Second, "handled", consumerSettled(t, e, "waits"))
	count := func(outcome string) float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() != "worldgate_handler_messages_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() == outcome {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	if calls.Load() != 2 || count("later") != 1 || count("error") != 0 || count("ok") != 1 {
		t.Fatalf("handler ran %d times; outcomes later %v, error %v, ok %v; want 2 runs (no in-process retry), later 1, error 0, ok 1",
			calls.Load(), count("later"), count("error"), count("ok"))
	}
}

func TestPermanentErrorDeadLettersAtOnce(t *testing.T) {
	e := natstest.Start(t)
	app := newApp(t, e, prometheus.NewRegistry())
	var calls atomic.Int32
	app.Handle("strict", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.strict"}, MaxDeliver: 5},
		func(m *message.Message) ([]*message.Message, error) {
			calls.Add(1)
			return nil, runtime.Permanentf("not JSON: %q", m.Payload)
		})
	stop := runtimetest.Start(t, app)
	defer stop()
	publish(t, e, "proposals.gate.strict", "m1", "{{{")
	natstest.WaitFor(t, 5*time.Second, "dead letter", func() bool { return natstest.StreamMsgs(t, e.JS, events.StreamDLQ, "") == 1 })
	if dl := lastMsg(t, e, events.StreamDLQ, "deadletter.strict"); dl.Header.Get(events.HeaderDLQDeliveries) != "1" || !strings.Contains(dl.Header.Get(events.HeaderDLQReason), "not JSON") {
		t.Fatalf("headers %v", dl.Header)
	}
	if calls.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", calls.Load())
	}
}

func TestPanicIsRecoveredAndRedelivered(t *testing.T) {
	e := natstest.Start(t)
	app := newApp(t, e, prometheus.NewRegistry())
	var calls atomic.Int32
	app.Handle("panicky", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.panicky"}, Backoff: []time.Duration{10 * time.Millisecond}},
		func(m *message.Message) ([]*message.Message, error) {
			if calls.Add(1) == 1 {
				panic("boom")
			}
			return []*message.Message{runtime.NewMessage("proposals.gate.after", "after:"+m.UUID, m.Payload)}, nil
		})
	stop := runtimetest.Start(t, app)
	defer stop()
	publish(t, e, "proposals.gate.panicky", "m1", "x")
	natstest.WaitFor(t, 5*time.Second, "output after the panic", func() bool { return natstest.StreamMsgs(t, e.JS, events.StreamProposals, "proposals.gate.after") == 1 })
}

// SIGTERM stops intake, lets the message in flight finish and be acknowledged, and leaves the
// rest for another replica.
func TestSIGTERMDrainsInFlight(t *testing.T) {
	e := natstest.Start(t)
	draining := &lineSignal{line: "worker draining", seen: make(chan struct{})}
	app, err := runtime.New(runtime.Options{Name: "test", Conn: e.Conn, JetStream: e.JS, Registerer: prometheus.NewRegistry(),
		Logger: logx.New(draining, "test", "info"), Retries: -1, CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	app.Handle("slow", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.slow"}, MaxAckPending: 1},
		func(m *message.Message) ([]*message.Message, error) {
			entered <- struct{}{}
			<-release
			return []*message.Message{runtime.NewMessage("proposals.gate.slowdone", "done:"+m.UUID, m.Payload)}, nil
		})
	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stopSignals()
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	publish(t, e, "proposals.gate.slow", "m1", "first")
	publish(t, e, "proposals.gate.slow", "m2", "second")
	<-entered
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	<-draining.seen // intake has stopped: the first message's acknowledgement lets no other in
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := natstest.StreamMsgs(t, e.JS, events.StreamProposals, "proposals.gate.slowdone"); n != 1 {
		t.Fatalf("%d outputs after drain, want exactly the one in flight", n)
	}
	c, _ := e.JS.Consumer(context.Background(), events.StreamProposals, "slow")
	var info *jetstream.ConsumerInfo
	// The server applies an ack asynchronously after the flush that sent it: poll.
	natstest.WaitFor(t, 5*time.Second, "the in-flight message acknowledged (ack floor 1)", func() bool {
		info, _ = c.Info(context.Background())
		return info != nil && info.AckFloor.Stream == 1
	})
	if info.NumPending+uint64(info.NumAckPending)+uint64(info.NumRedelivered) == 0 {
		t.Fatalf("the second message vanished: %+v", info)
	}
}

// lineSignal is a log writer that closes seen at the first line containing line.
type lineSignal struct {
	line string
	seen chan struct{}
	once sync.Once
}

func (w *lineSignal) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.line) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// An output whose acknowledgement never comes (here a subject no stream stores, which a plain
// subscriber takes and never answers: as an acknowledgement lost with a NATS node) fails the
// handler after the publish timeout, and the input is redelivered. Before, two outputs were
// awaited without a deadline and the input sat until its hold time (two minutes) ran out.
func TestAnUnacknowledgedOutputFailsTheHandler(t *testing.T) {
	e := natstest.Start(t)
	swallow, err := e.Conn.SubscribeSync("nowhere.out")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = swallow.Unsubscribe() }()
	app, err := runtime.New(runtime.Options{Name: "test", Conn: e.Conn, JetStream: e.JS, Registerer: prometheus.NewRegistry(), Logger: logx.Discard(),
		Retries: -1, CloseTimeout: 5 * time.Second, PublishTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	app.Handle("two-outputs", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.two"}, Backoff: []time.Duration{10 * time.Millisecond}},
		func(m *message.Message) ([]*message.Message, error) {
			calls.Add(1)
			return []*message.Message{
				runtime.NewMessage("proposals.gate.stored", "stored:"+m.UUID, m.Payload),
				runtime.NewMessage("nowhere.out", "lost:"+m.UUID, m.Payload),
			}, nil
		})
	stop := runtimetest.Start(t, app)
	defer stop()
	publish(t, e, "proposals.gate.two", "m1", "x")
	natstest.WaitFor(t, 10*time.Second, "the input redelivered after its outputs went unacknowledged", func() bool { return calls.Load() >= 2 })
}

// A panic in the wrapping around a handler (outside the recoverer, which only its handler
// runs inside) is a failed delivery: the message comes back and is handled, and the worker
// lives on. Without it the pool's goroutine swallows the panic and the message is never
// settled: nothing more happens to it until its hold time runs out.
func TestAPanicAroundTheHandlerIsRedelivered(t *testing.T) {
	e := natstest.Start(t)
	app := newApp(t, e, prometheus.NewRegistry())
	app.Handle("wrapped", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.wrapped"}, Backoff: []time.Duration{10 * time.Millisecond}},
		func(m *message.Message) ([]*message.Message, error) {
			return []*message.Message{runtime.NewMessage("proposals.gate.after", "after:"+m.UUID, m.Payload)}, nil
		})
	var calls atomic.Int32
	runtime.WrapChain(app, 0, func(chain func(*message.Message) error) func(*message.Message) error {
		return func(m *message.Message) error {
			if calls.Add(1) == 1 {
				panic("a middleware broke")
			}
			return chain(m)
		}
	})
	runtimetest.Start(t, app)
	publish(t, e, "proposals.gate.wrapped", "m1", "x")
	natstest.WaitFor(t, 10*time.Second, "output after the panic", func() bool {
		return natstest.StreamMsgs(t, e.JS, events.StreamProposals, "proposals.gate.after") == 1
	})
	if n := calls.Load(); n != 2 {
		t.Fatalf("handled %d times, want 2 (the panic, then the redelivery)", n)
	}
}
