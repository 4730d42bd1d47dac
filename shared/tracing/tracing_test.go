package tracing

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

func TestOffByDefaultInstallsNothingAndInjectsNothing(t *testing.T) {
	stop, err := Setup(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	if Provider() != nil {
		t.Fatal("tracing is on without an endpoint")
	}
	h := nats.Header{}
	ctx, span := StartPublish(context.Background(), "world.events.player.moved", "c-1", HeaderCarrier(h))
	EndSpan(span, nil)
	if len(h) != 0 || trace.SpanContextFromContext(ctx).IsValid() {
		t.Fatalf("off, but the publish got trace context: %v", h)
	}
}

func TestSetupExportsSpansOverOTLPHTTP(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var bodies [][]byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		bodies = append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()

	stop, err := Setup(context.Background(), Config{Endpoint: collector.URL, SampleRatio: 1, ServiceName: "gate"})
	if err != nil {
		t.Fatal(err)
	}
	if Provider() == nil {
		t.Fatal("an endpoint was given but tracing is off")
	}
	h := nats.Header{}
	_, span := StartPublish(context.Background(), "world.events.player.moved", "corr-export", HeaderCarrier(h))
	EndSpan(span, nil)
	tp := h.Get("traceparent")
	if !strings.HasPrefix(tp, "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()) {
		t.Fatalf("traceparent %q does not name the publish span", tp)
	}
	if err := stop(); err != nil { // flushes the batch
		t.Fatal(err)
	}
	if Provider() != nil {
		t.Fatal("stop left tracing on")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) == 0 || paths[0] != "POST /v1/traces application/x-protobuf" {
		t.Fatalf("collector saw %v", paths)
	}
	all := bytes.Join(bodies, nil)
	for _, want := range []string{"publish world.events.player.moved", "corr-export", "gate"} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("exported spans lack %q", want)
		}
	}
}

func TestSetupRefusesBadSettings(t *testing.T) {
	for _, cfg := range []Config{{Endpoint: "http://collector:4318", SampleRatio: 0}, {Endpoint: "http://", SampleRatio: 1}} {
		if _, err := Setup(context.Background(), cfg); err == nil {
			t.Errorf("%+v: want an error", cfg)
		}
	}
	if Provider() != nil {
		t.Fatal("a refused setup turned tracing on")
	}
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"collector:4318":                   "http://collector:4318/v1/traces",
		"http://collector:4318":            "http://collector:4318/v1/traces",
		"https://otel.example.com/custom/": "https://otel.example.com/custom/",
	} {
		if got, err := endpointURL(in); err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestHeaderCarrierIsCaseTolerantOnRead(t *testing.T) {
	h := nats.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	ctx := Extract(context.Background(), h)
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !sc.IsRemote() {
		t.Fatalf("extracted %v", sc)
	}
	out := nats.Header{}
	Inject(ctx, out)
	if out.Get("traceparent") != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("re-injected %v", out)
	}
}

// A Go publisher's first hop: the publish span's context reaches JetStream through
// events.WithHeaders (events itself knows nothing of OpenTelemetry).
func TestEventsPublishCarriesThePublishersTraceContext(t *testing.T) {
	e := natstest.Start(t)
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	defer Use(tp)()
	env, err := events.NewEnvelope(events.PlayerMoved, "game-backend/eu-1", events.Actor{Kind: "player", ID: "player:ada"},
		events.PlayerMovedPayload{PlayerID: "player:ada", FromLocationID: "loc:a", ToLocationID: "loc:b"})
	if err != nil {
		t.Fatal(err)
	}
	h := nats.Header{}
	_, span := StartPublish(context.Background(), events.Subject(env.Type), env.CorrelationID, HeaderCarrier(h))
	h.Set(events.HeaderCorrelationID, "an attempt to override")
	_, err = events.Publish(context.Background(), e.JS, env, events.WithHeaders(h))
	EndSpan(span, err)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.JS.Stream(context.Background(), events.StreamWorld)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), events.Subject(env.Type))
	if err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	if got := m.Header.Get(events.HeaderTraceParent); got != "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01" {
		t.Errorf("stored traceparent %q, want the publish span %s", got, sc.SpanID())
	}
	if got := m.Header.Get(events.HeaderCorrelationID); got != env.CorrelationID {
		t.Errorf("correlation header %q: the envelope's %q must win", got, env.CorrelationID)
	}
}
