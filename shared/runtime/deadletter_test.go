package runtime_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
)

// As large a message as PROPOSALS takes (1 MiB, a 60 KiB header included) is dead-lettered
// at once on a permanent error: the dead letter holds the first natsx.DeadLetterBodyMax bytes,
// the original size, stream, sequence, subject and reason, the correlation id, and leaves out
// the header that does not fit; the DLQ takes it and the message is acknowledged.
func TestOversizedMessageIsDeadLetteredWithABoundedExcerpt(t *testing.T) {
	e := natstest.Start(t)
	reg := prometheus.NewRegistry()
	app := newApp(t, e, reg)
	app.Handle("strict", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.strict"}},
		func(m *message.Message) ([]*message.Message, error) {
			return nil, runtime.Permanentf("message of %d bytes is over the 64 KiB limit", len(m.Payload))
		})
	stop := runtimetest.Start(t, app)
	defer stop()
	msg := &nats.Msg{Subject: "proposals.gate.strict", Header: nats.Header{}}
	msg.Header.Set(events.HeaderCorrelationID, "corr-big")
	msg.Header.Set("X-Junk", strings.Repeat("j", 60<<10))
	msg.Data = []byte(strings.Repeat("b", 1<<20-60<<10-300))
	ack, err := e.JS.PublishMsg(context.Background(), msg, jetstream.WithMsgID("big"))
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 10*time.Second, "dead letter", func() bool { return natstest.StreamMsgs(t, e.JS, events.StreamDLQ, "") == 1 })
	dl := lastMsg(t, e, events.StreamDLQ, events.DeadLetterSubject("strict"))
	h := dl.Header
	if len(dl.Data) != natsx.DeadLetterBodyMax || h.Get(events.HeaderDLQBodySize) != strconv.Itoa(len(msg.Data)) ||
		h.Get(events.HeaderDLQStream) != events.StreamProposals || h.Get(events.HeaderDLQSequence) != strconv.FormatUint(ack.Sequence, 10) ||
		h.Get(events.HeaderDLQSubject) != "proposals.gate.strict" || !strings.Contains(h.Get(events.HeaderDLQReason), "over the 64 KiB limit") ||
		h.Get(events.HeaderCorrelationID) != "corr-big" || h.Get("X-Junk") != "" || h.Get(events.HeaderDLQHeadersDropped) != "1" {
		t.Fatalf("dead letter of %d bytes, headers %v", len(dl.Data), h)
	}
	natstest.WaitFor(t, 5*time.Second, "input acked", consumerSettled(t, e, "strict"))
}

// A message whose dead letter cannot be published (here: no DLQ stream at all) is tried on the
// deliveries left for it, then terminated and counted: it is not redelivered for ever, and the
// server's delivery limit is bounded.
func TestUnpublishableDeadLetterIsTerminatedAndCounted(t *testing.T) {
	e := natstest.Start(t)
	if err := e.JS.DeleteStream(context.Background(), events.StreamDLQ); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	app := newApp(t, e, reg)
	var calls atomic.Int32
	app.Handle("doomed", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.doomed"},
		MaxDeliver: 2, Backoff: []time.Duration{20 * time.Millisecond}},
		func(m *message.Message) ([]*message.Message, error) {
			calls.Add(1)
			return nil, runtime.Permanentf("cannot decode")
		})
	stop := runtimetest.Start(t, app)
	defer stop()
	publish(t, e, "proposals.gate.doomed", "m1", "garbage")
	natstest.WaitFor(t, 10*time.Second, "the message terminated", consumerSettled(t, e, "doomed"))
	if got := metricstest.Sum(t, reg, "worldgate_terminated_total", nil); got != 1 {
		t.Fatalf("terminated_total = %v, want 1", got)
	}
	c, err := e.JS.Consumer(context.Background(), events.StreamProposals, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	want := 2 + natsx.DeadLetterAttempts
	if got := c.CachedInfo().Config.MaxDeliver; got != want {
		t.Fatalf("server MaxDeliver %d, want %d", got, want)
	}
	if got := int(calls.Load()); got != want {
		t.Fatalf("handler ran %d times, want %d (the handler's limit plus the dead letter's attempts)", got, want)
	}
}
