package runtime

import (
	"reflect"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/tracing"
)

// BenchmarkTracingHook measures what tracing adds around one handled message that produces
// one output: "off" is the chain as installed when tracing is off (the tracing layers are not
// installed at all); "on" adds the span per message (sampled, batched to an exporter that
// drops them) and the injection into the output.
func BenchmarkTracingHook(b *testing.B) {
	handler := func(m *message.Message) ([]*message.Message, error) {
		return []*message.Message{NewMessage("proposals.gate.next", "next:"+m.UUID, m.Payload)}, nil
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(b.Context()) })
	for _, tc := range []struct {
		name string
		app  *App
	}{
		{"off", &App{}},
		{"on", &App{tracer: tracing.Tracer(tp)}},
	} {
		a := tc.app
		chain := a.traced("bench", a.injectTrace(a.correlate(handler)))
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m := message.NewMessage("in-1", []byte(`{"proposalId":"p-1"}`))
				m.Metadata.Set(MetaSubject, "proposals.gate.bench")
				m.Metadata.Set(MetaStream, events.StreamProposals)
				m.Metadata.Set(events.HeaderCorrelationID, "c-1")
				m.Metadata.Set(events.HeaderTraceParent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
				if _, err := chain(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Off, the tracing layers are not installed: the chain is the same function, so tracing off
// costs nothing per message.
func TestTracingOffInstallsNoLayer(t *testing.T) {
	h := func(*message.Message) ([]*message.Message, error) { return nil, nil }
	a := &App{}
	for name, got := range map[string]message.HandlerFunc{"traced": a.traced("h", h), "injectTrace": a.injectTrace(h)} {
		if reflect.ValueOf(got).Pointer() != reflect.ValueOf(h).Pointer() {
			t.Errorf("%s wraps the handler although tracing is off", name)
		}
	}
}
