package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
	"github.com/worldgate/worldgate/shared/tracing"
)

// forward is a handler that passes its input on to subject, or fails permanently on "poison".
func forward(subject string) message.HandlerFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		if string(m.Payload) == "poison" {
			return nil, runtime.Permanentf("cannot handle poison")
		}
		return []*message.Message{runtime.NewMessage(subject, subject+":"+m.UUID, m.Payload)}, nil
	}
}

func TestTraceContextFollowsEveryHop(t *testing.T) {
	e := natstest.Start(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	restore := tracing.Use(tp) // the first hop's publish span comes from the installed provider
	defer restore()

	// Two workers, as two services would be: in → first → mid → second → out.
	for _, hop := range []struct{ name, in, out string }{
		{"first", "proposals.gate.in", "proposals.gate.mid"},
		{"second", "proposals.gate.mid", "proposals.gate.out"},
	} {
		app, err := runtime.New(runtime.Options{Name: hop.name, Conn: e.Conn, JetStream: e.JS, Registerer: prometheus.NewRegistry(),
			Logger: logx.Discard(), Retries: -1, TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		app.Handle(hop.name, runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{hop.in}}, forward(hop.out))
		defer runtimetest.Start(t, app)()
	}

	publishTraced := func(id, body string) {
		msg := &nats.Msg{Subject: "proposals.gate.in", Data: []byte(body), Header: nats.Header{}}
		msg.Header.Set(events.HeaderCorrelationID, "corr-"+id)
		_, span := tracing.StartPublish(context.Background(), msg.Subject, "corr-"+id, tracing.HeaderCarrier(msg.Header))
		_, err := e.JS.PublishMsg(context.Background(), msg, jetstream.WithMsgID(id))
		tracing.EndSpan(span, err)
		if err != nil {
			t.Fatal(err)
		}
	}
	publishTraced("m1", "hello")
	natstest.WaitFor(t, 5*time.Second, "output of the second hop", func() bool {
		return natstest.StreamMsgs(t, e.JS, events.StreamProposals, "proposals.gate.out") == 1
	})
	natstest.WaitFor(t, 5*time.Second, "three spans", func() bool { return len(exp.GetSpans()) >= 3 })

	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.Name] = s
	}
	pub, first, second := spans["publish proposals.gate.in"], spans["first"], spans["second"]
	if !pub.SpanContext.IsValid() || !first.SpanContext.IsValid() || !second.SpanContext.IsValid() {
		t.Fatalf("missing spans: %v", names(exp.GetSpans()))
	}
	tid := pub.SpanContext.TraceID()
	if first.SpanContext.TraceID() != tid || second.SpanContext.TraceID() != tid {
		t.Fatalf("the hops are in different traces: %s %s %s", tid, first.SpanContext.TraceID(), second.SpanContext.TraceID())
	}
	if first.Parent.SpanID() != pub.SpanContext.SpanID() || !first.Parent.IsRemote() {
		t.Errorf("first hop's parent %s, want the publish span %s (remote)", first.Parent.SpanID(), pub.SpanContext.SpanID())
	}
	if second.Parent.SpanID() != first.SpanContext.SpanID() {
		t.Errorf("second hop's parent %s, want the first hop's span %s", second.Parent.SpanID(), first.SpanContext.SpanID())
	}
	if second.SpanKind != trace.SpanKindConsumer || attr(second, tracing.AttrCorrelationID) != "corr-m1" ||
		attr(second, tracing.AttrStream) != events.StreamProposals || attr(second, tracing.AttrDestination) != "proposals.gate.mid" {
		t.Errorf("second hop's span: kind %v attributes %v", second.SpanKind, second.Attributes)
	}
	out := lastMsg(t, e, events.StreamProposals, "proposals.gate.out")
	want := "00-" + tid.String() + "-" + second.SpanContext.SpanID().String() + "-01"
	if got := out.Header.Get(events.HeaderTraceParent); got != want {
		t.Errorf("output traceparent %q, want %q (the second hop's span)", got, want)
	}

	// A dead letter carries the span of the handler that gave up, which records the error.
	publishTraced("m2", "poison")
	natstest.WaitFor(t, 5*time.Second, "dead letter", func() bool { return natstest.StreamMsgs(t, e.JS, events.StreamDLQ, "") == 1 })
	dl := lastMsg(t, e, events.StreamDLQ, events.DeadLetterSubject("first"))
	var failed tracetest.SpanStub
	// The span ends once the dead letter is acknowledged, just after it is visible.
	natstest.WaitFor(t, 5*time.Second, "the failed span", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "first" && s.Status.Code == codes.Error {
				failed = s
			}
		}
		return failed.SpanContext.IsValid()
	})
	if !strings.Contains(failed.Status.Description, "poison") || failed.SpanContext.TraceID() == tid {
		t.Fatalf("failed span %+v: want the poison error, in a trace of its own", failed.Status)
	}
	if got := dl.Header.Get(events.HeaderTraceParent); !strings.Contains(got, failed.SpanContext.SpanID().String()) {
		t.Errorf("dead letter traceparent %q, want the failing span %s", got, failed.SpanContext.SpanID())
	}
}

func TestTracingOffAddsNoTraceparentButPassesOneOn(t *testing.T) {
	e := natstest.Start(t)
	restore := tracing.Use(nil)
	defer restore()
	app := newApp(t, e, prometheus.NewRegistry())
	app.Handle("plain", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.plain"}}, forward("proposals.gate.after"))
	defer runtimetest.Start(t, app)()

	publish(t, e, "proposals.gate.plain", "m1", "untraced")
	natstest.WaitFor(t, 5*time.Second, "output", func() bool { return natstest.StreamMsgs(t, e.JS, events.StreamProposals, "proposals.gate.after") == 1 })
	if h := lastMsg(t, e, events.StreamProposals, "proposals.gate.after").Header; h.Get(events.HeaderTraceParent) != "" || h.Get("tracestate") != "" {
		t.Fatalf("tracing is off but the output carries trace context: %v", h)
	}

	// An upstream publisher's trace context passes through a worker that does not trace.
	const upstream = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	msg := &nats.Msg{Subject: "proposals.gate.plain", Data: []byte("traced upstream"), Header: nats.Header{}}
	msg.Header.Set(events.HeaderTraceParent, upstream)
	if _, err := e.JS.PublishMsg(context.Background(), msg, jetstream.WithMsgID("m2")); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 5*time.Second, "second output", func() bool { return natstest.StreamMsgs(t, e.JS, events.StreamProposals, "proposals.gate.after") == 2 })
	if got := lastMsg(t, e, events.StreamProposals, "proposals.gate.after").Header.Get(events.HeaderTraceParent); got != upstream {
		t.Fatalf("traceparent %q, want the upstream one passed on unchanged", got)
	}
}

func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}
