// Package tracing is Worldgate's distributed tracing: OpenTelemetry spans whose W3C trace
// context (traceparent, tracestate) travels in NATS headers across every hop, exported over
// OTLP/HTTP when an endpoint is configured.
//
// Tracing is off by default. Off, Provider returns nil and the worker runtime does not even
// install its tracing middleware, so a message costs nothing extra and no traceparent is added
// (one that arrived on a message is still passed on unchanged, so a publisher's trace survives
// a hop that does not trace). On, Setup installs an SDK tracer provider with a batching OTLP
// exporter and the W3C propagator; the runtime then starts one span per handled message (a
// child of the span in the message's headers) and injects it into every message the handler
// publishes and every dead letter.
//
// The package knows nothing of the business; events (the publisher-facing module) must not
// import it, so first-hop publishers set the headers Inject fills.
package tracing

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName names Worldgate's tracer.
const InstrumentationName = "github.com/worldgate/worldgate/shared/tracing"

// Config configures tracing. The zero value is off.
type Config struct {
	// Endpoint is the OTLP/HTTP collector, e.g. http://otel-collector:4318 (spans go to
	// /v1/traces unless the URL names another path). Empty: tracing is off.
	Endpoint string
	// SampleRatio is the share of new traces recorded (0 < r ≤ 1; default 1). A message whose
	// parent was sampled is always recorded.
	SampleRatio float64
	// ServiceName is the service.name resource attribute.
	ServiceName string
}

// RegisterFlags adds -otlp-endpoint and -otlp-sample-ratio to fs (environment:
// WORLDGATE_OTLP_ENDPOINT, WORLDGATE_OTLP_SAMPLE_RATIO through shared/config).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Endpoint, "otlp-endpoint", "", "OTLP/HTTP endpoint for traces, e.g. http://otel-collector:4318 (empty: tracing off)")
	fs.Float64Var(&c.SampleRatio, "otlp-sample-ratio", 1, "share of new traces recorded when tracing is on (0 < r ≤ 1)")
}

// Enabled reports whether c turns tracing on.
func (c Config) Enabled() bool { return c.Endpoint != "" }

// propagator is the W3C trace context (and baggage) propagator used on every hop.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Propagator returns the propagator Worldgate carries trace context with.
func Propagator() propagation.TextMapPropagator { return propagator }

type installed struct{ tp trace.TracerProvider }

var current atomic.Pointer[installed]

// Provider returns the tracer provider installed by Setup or Use, or nil when tracing is off.
func Provider() trace.TracerProvider {
	if in := current.Load(); in != nil {
		return in.tp
	}
	return nil
}

// Use installs tp as the process's tracer provider (nil turns tracing off) and returns a
// function that restores the previous one. Setup calls it; tests call it with an SDK provider
// on an in-memory exporter.
func Use(tp trace.TracerProvider) (restore func()) {
	var in *installed
	if tp != nil {
		in = &installed{tp: tp}
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(propagator)
	}
	prev := current.Swap(in)
	return func() { current.Store(prev) }
}

// Setup turns tracing on when cfg has an endpoint: an SDK tracer provider exporting in batches
// over OTLP/HTTP, installed for the process. Off, it installs nothing. The returned stop
// flushes the spans still buffered (waiting at most 5 s) and turns tracing off; defer it.
func Setup(ctx context.Context, cfg Config) (stop func() error, err error) {
	noop := func() error { return nil }
	if !cfg.Enabled() {
		return noop, nil
	}
	if cfg.SampleRatio <= 0 || cfg.SampleRatio > 1 {
		return noop, fmt.Errorf("-otlp-sample-ratio %v: want a share in (0, 1]", cfg.SampleRatio)
	}
	endpoint, err := endpointURL(cfg.Endpoint)
	if err != nil {
		return noop, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return noop, fmt.Errorf("OTLP exporter for %s: %w", endpoint, err)
	}
	res, err := sdkresource.New(ctx, sdkresource.WithFromEnv(), sdkresource.WithTelemetrySDK(),
		sdkresource.WithAttributes(attribute.String("service.name", serviceName(cfg.ServiceName))))
	if err != nil {
		return noop, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))))
	restore := Use(tp)
	return func() error {
		restore()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return tp.Shutdown(ctx)
	}, nil
}

func serviceName(s string) string {
	if s == "" {
		return "worldgate"
	}
	return s
}

// endpointURL accepts host:port or a URL and returns a URL whose path is /v1/traces unless it
// names one.
func endpointURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("-otlp-endpoint %q: want a URL such as http://otel-collector:4318", s)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// Tracer returns Worldgate's tracer from tp.
func Tracer(tp trace.TracerProvider) trace.Tracer { return tp.Tracer(InstrumentationName) }

// HeaderCarrier adapts NATS message headers to the propagation API. NATS header names are
// case-sensitive; W3C names are lower-case, and a reader also accepts other spellings.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the value of key.
func (h HeaderCarrier) Get(key string) string {
	if v := nats.Header(h).Get(key); v != "" {
		return v
	}
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set sets key to value.
func (h HeaderCarrier) Set(key, value string) { nats.Header(h).Set(key, value) }

// Keys lists the header names.
func (h HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// MetadataCarrier adapts a watermill message's metadata (which becomes NATS headers) to the
// propagation API.
func MetadataCarrier(m map[string]string) propagation.TextMapCarrier {
	return propagation.MapCarrier(m)
}

// Inject writes the trace context of ctx's span into h. It writes nothing when ctx carries no
// valid span (tracing off, or no span started).
func Inject(ctx context.Context, h nats.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, HeaderCarrier(h))
}

// Extract returns ctx carrying the remote span context found in h, if any.
func Extract(ctx context.Context, h nats.Header) context.Context {
	return propagator.Extract(ctx, HeaderCarrier(h))
}

// Attribute keys Worldgate sets on its spans (the messaging.* ones are OpenTelemetry's
// semantic conventions).
const (
	AttrMessagingSystem = attribute.Key("messaging.system")
	AttrDestination     = attribute.Key("messaging.destination.name")
	AttrStream          = attribute.Key("worldgate.stream")
	AttrCorrelationID   = attribute.Key("worldgate.correlation_id")
	AttrHandler         = attribute.Key("worldgate.handler")
)

// StartPublish starts a producer span for a first-hop publish (an envelope from the CLI, a
// world file's proposals) and writes its context into the message's headers (HeaderCarrier of
// a nats.Header, or MetadataCarrier of a watermill message's metadata), so the workers'
// spans join the trace. Off, it touches nothing and returns a no-op span. End the span with
// EndSpan once the publish is sent.
func StartPublish(ctx context.Context, subject, correlationID string, headers propagation.TextMapCarrier) (context.Context, trace.Span) {
	tp := Provider()
	if tp == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := Tracer(tp).Start(ctx, "publish "+subject, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(AttrMessagingSystem.String("nats"), AttrDestination.String(subject),
			AttrCorrelationID.String(correlationID)))
	propagator.Inject(ctx, headers)
	return ctx, span
}

// EndSpan records err (if any) on span and ends it.
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
