package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/telemetry"
	"github.com/worldgate/worldgate/shared/tracing"
)

// Options configure an App.
type Options struct {
	Name        string // service name, e.g. "gate"; registered with NATS service discovery
	Version     string
	Description string
	Conn        *nats.Conn
	JetStream   jetstream.JetStream
	Registerer  prometheus.Registerer
	Logger      *slog.Logger
	// Retries are in-process retries of a failing handler before the message is handed back
	// to JetStream for a delayed redelivery. Default 2; -1 disables them.
	Retries int
	// CloseTimeout bounds how long a shutdown waits for in-flight messages. Default 30s.
	CloseTimeout time.Duration
	// PublishTimeout bounds the wait for JetStream's acknowledgements of a handler's outputs;
	// past it the handler fails and the input is redelivered. Default 10s.
	PublishTimeout time.Duration
	// TracerProvider traces every handled message (see shared/tracing). Nil: the provider
	// tracing.Setup installed, and none (tracing off) when it installed none.
	TracerProvider trace.TracerProvider
}

// intake is how a handler's messages come in: one durable consumer (subscriber) or the
// partitions a replica owns (partitionGroup).
type intake interface {
	start(ctx context.Context, handle func(*message.Message) error, run func(func())) error
	stopIntake()   // no message is handed to the handler after it returns
	waitInflight() // until what was handed out settled
	Close() error  // settles what is in flight (bounded) and lets go of the consumer
}

// App runs a worker's handlers, each on its durable consumer.
type App struct {
	opts    Options
	pub     *Publisher
	metrics *handlerMetrics
	log     *slog.Logger
	tracer  trace.Tracer // nil: tracing off
	warm    *warm        // while Run runs: the goroutines the handlers run on

	mu       sync.Mutex
	handlers []string
	subs     []intake
	chains   []func(*message.Message) error // by handler, as subs
	stats    map[string]func() any
	running  atomic.Bool
	handled  atomic.Int64
	failed   atomic.Int64
}

// New returns an App. It refuses missing dependencies.
func New(opts Options) (*App, error) {
	switch {
	case opts.Name == "":
		return nil, errors.New("runtime: a service name is required")
	case opts.Conn == nil || opts.JetStream == nil:
		return nil, errors.New("runtime: a NATS connection and JetStream context are required")
	case opts.Logger == nil:
		return nil, errors.New("runtime: a logger is required")
	case opts.Registerer == nil:
		return nil, errors.New("runtime: a metrics registerer is required")
	}
	if opts.Retries == 0 {
		opts.Retries = 2
	}
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = 30 * time.Second
	}
	if opts.Version == "" {
		opts.Version = "0.1.0"
	}
	a := &App{
		opts:    opts,
		pub:     NewPublisher(opts.JetStream, opts.PublishTimeout),
		metrics: newHandlerMetrics(opts.Registerer),
		log:     opts.Logger,
	}
	if opts.TracerProvider == nil {
		opts.TracerProvider = tracing.Provider()
	}
	if opts.TracerProvider != nil {
		a.tracer = tracing.Tracer(opts.TracerProvider)
	}
	return a, nil
}

// Publisher is the app's JetStream publisher, for handlers that publish outside their return
// value (rare: prefer returning messages).
func (a *App) Publisher() *Publisher { return a.pub }

// Handle registers h on the durable consumer c. h returns the messages to publish (built with
// NewMessage); the input is acknowledged only after every one is acknowledged by JetStream.
// Around h, once: panic recovery, in-process retries, publishing, correlation-id propagation,
// bounded redelivery with backoff and a dead letter on deadletter.<name>, metrics and logs,
// and, when tracing is on, a span per message whose context every output carries.
func (a *App) Handle(name string, c Consumer, h message.HandlerFunc) {
	c.setDefaults()
	if c.Durable == "" {
		c.Durable = name
	}
	chain := a.recoverer(h)
	chain = a.correlate(chain)
	chain = a.injectTrace(chain)
	chain = a.publishOutputs(chain)
	chain = a.retry(chain)
	chain = a.deadLetter(name, c, chain)
	chain = a.observe(name, chain)
	chain = a.traced(name, chain)
	var sub intake = newSubscriber(a.opts.JetStream, c, a.log.With("handler", name))
	if c.Partitioned != nil {
		sub = newPartitionGroup(a.opts.JetStream, c, a.log.With("handler", name), a.metrics, name)
	}
	a.mu.Lock()
	a.subs = append(a.subs, sub)
	a.chains = append(a.chains, func(m *message.Message) error {
		_, err := chain(m)
		return err
	})
	a.handlers = append(a.handlers, name)
	a.mu.Unlock()
}

// Run provisions nothing (see natsx.Provision), registers the service for discovery, runs the
// handlers until ctx is cancelled, then drains: it stops taking messages, lets those in flight
// finish and be acknowledged, and returns.
func (a *App) Run(ctx context.Context) error {
	svc, err := natsx.Register(a.opts.Conn, natsx.Service{
		Name:        a.opts.Name,
		Version:     a.opts.Version,
		Description: a.opts.Description,
		Metadata:    map[string]string{"handlers": fmt.Sprint(a.handlers)},
		Status: func() map[string]any {
			running := a.running.Load()
			health := natsx.HealthOK
			if !running {
				health = "handlers are not running"
			}
			return a.extraStats(map[string]any{"service": a.opts.Name, "running": running, "health": health, "handlers": a.handlers,
				"handled": a.handled.Load(), "failed": a.failed.Load()})
		},
	})
	if err != nil {
		return fmt.Errorf("register %s with NATS service discovery: %w", a.opts.Name, err)
	}
	defer func() { _ = svc.Stop() }()
	a.log.Info("worker starting", "handlers", a.handlers)
	if a.warm, err = newWarm(); err != nil {
		return fmt.Errorf("start %s: %w", a.opts.Name, err)
	}
	defer a.warm.release()
	a.mu.Lock()
	subs, chains := slices.Clone(a.subs), slices.Clone(a.chains)
	a.mu.Unlock()
	for i, s := range subs {
		if err := s.start(ctx, chains[i], a.warm.goRun); err != nil {
			for _, started := range subs[:i] {
				_ = started.Close()
			}
			if ctx.Err() != nil {
				return nil // stopped while starting
			}
			return fmt.Errorf("start %s: %w", a.opts.Name, err)
		}
	}
	a.running.Store(true)
	<-ctx.Done()
	a.running.Store(false)
	// Intake stops first, on every consumer, before anything else: from the "draining" line
	// on, no message is handed to a handler; those in flight finish and are acknowledged.
	for _, s := range subs {
		s.stopIntake()
	}
	a.log.Info("worker draining")
	drained := make(chan struct{})
	go func() {
		for _, s := range subs {
			s.waitInflight()
		}
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(a.opts.CloseTimeout):
		a.log.Warn("messages still in flight after the close timeout; JetStream redelivers them", "closeTimeout", a.opts.CloseTimeout)
	}
	for _, s := range subs {
		_ = s.Close()
	}
	// Acks are sent asynchronously: flush them before the caller closes the connection.
	flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.opts.Conn.FlushWithContext(flushCtx)
	a.log.Info("worker stopped")
	return nil
}

// AddStats adds a named entry to what the service reports through NATS service discovery
// ($SRV.STATS, the status endpoint, and so worldgate status): e.g. the ai-worker's LLM
// targets and their circuits. f is called on every request and must be quick.
func (a *App) AddStats(name string, f func() any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stats == nil {
		a.stats = map[string]func() any{}
	}
	a.stats[name] = f
}

func (a *App) extraStats(m map[string]any) map[string]any {
	a.mu.Lock()
	fs := make(map[string]func() any, len(a.stats))
	for n, f := range a.stats {
		fs[n] = f
	}
	a.mu.Unlock()
	for n, f := range fs {
		m[n] = f()
	}
	return m
}

// Ready reports whether the handlers are consuming; use it as a readiness check.
func (a *App) Ready(context.Context) error {
	if !a.running.Load() {
		return errors.New("handlers are not running")
	}
	if !a.opts.Conn.IsConnected() {
		return errors.New("not connected to NATS")
	}
	return nil
}

type chainFunc = message.HandlerFunc

func (a *App) recoverer(h chainFunc) chainFunc {
	return func(m *message.Message) (out []*message.Message, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("handler panicked: %v", r)
				logx.From(m.Context(), a.log).Error("handler panicked", "correlationId", CorrelationID(m), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			}
		}()
		return h(m)
	}
}

// correlate gives every produced message the input's correlation id and the input's id as
// causation id, unless the handler set them, and carries the trace context along (as it
// arrived; when tracing is on, injectTrace then replaces it with the handler's span).
func (a *App) correlate(h chainFunc) chainFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		out, err := h(m)
		for _, o := range out {
			for _, k := range []string{events.HeaderCorrelationID, events.HeaderTraceParent, "tracestate"} {
				if o.Metadata.Get(k) == "" && m.Metadata.Get(k) != "" {
					o.Metadata.Set(k, m.Metadata.Get(k))
				}
			}
			if o.Metadata.Get(events.HeaderCausationID) == "" {
				o.Metadata.Set(events.HeaderCausationID, m.UUID)
			}
		}
		return out, err
	}
}

func (a *App) publishOutputs(h chainFunc) chainFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		out, err := h(m)
		if err != nil || len(out) == 0 {
			return nil, err
		}
		if err := a.pub.PublishContext(m.Context(), "", out...); err != nil {
			return nil, err
		}
		return nil, nil
	}
}

func (a *App) retry(h chainFunc) chainFunc {
	if a.opts.Retries < 0 {
		return h
	}
	return func(m *message.Message) ([]*message.Message, error) {
		delay := 50 * time.Millisecond
		for attempt := 0; ; attempt++ {
			out, err := h(m)
			if err == nil || IsPermanent(err) || IsLater(err) || attempt >= a.opts.Retries {
				return out, err
			}
			select {
			case <-time.After(delay):
			case <-m.Context().Done():
				return nil, err
			}
			delay *= 4
		}
	}
}

// deadLetter lets a failed message go back to JetStream for a delayed redelivery until its
// delivery limit, then publishes a dead letter to deadletter.<stage> with the reason and
// acknowledges the message. A permanent error dead-letters at once. The dead letter is bounded
// (natsx.DeadLetterMax, which the DLQ always accepts): the body whole when it fits, else an
// excerpt, with the original's stream, sequence and subject. If the dead letter cannot be
// published the message is redelivered (with backoff) for up to natsx.DeadLetterAttempts more
// deliveries; on the last one it is terminated, counted and logged: never redelivered for ever.
func (a *App) deadLetter(stage string, c Consumer, h chainFunc) chainFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		out, err := h(m)
		if err == nil {
			return out, nil
		}
		deliveries := Deliveries(m)
		permanent := IsPermanent(err)
		if !permanent && deliveries < c.MaxDeliver {
			return nil, err
		}
		reason := "exhausted"
		if permanent {
			reason = "permanent"
		}
		dl := buildDeadLetter(stage, m, err, deliveries)
		if a.tracer != nil {
			tracing.Propagator().Inject(m.Context(), propagation.MapCarrier(dl.Metadata)) // points to the handler's span
		}
		log := logx.From(m.Context(), a.log)
		var also []*message.Message
		if pe := (*PermanentError)(nil); errors.As(err, &pe) {
			also = pe.Also
		}
		if perr := a.pub.PublishContext(m.Context(), "", append(slices.Clip(also), dl)...); perr != nil {
			err = fmt.Errorf("%w (and the dead letter could not be published: %v)", err, perr)
			if deliveries >= c.serverMaxDeliver() {
				a.metrics.terminated.WithLabelValues(stage).Inc()
				log.Error("message terminated: it failed and its dead letter could not be published on any delivery left",
					"correlationId", CorrelationID(m), "stage", stage, "err", err, "deliveries", deliveries,
					"stream", m.Metadata.Get(MetaStream), "sequence", m.Metadata.Get(MetaSequence), "subject", m.Metadata.Get(MetaSubject))
				m.Metadata.Set(metaTerminate, truncate("dead letter failed: "+err.Error(), 256))
			}
			return nil, err
		}
		a.metrics.deadLetters.WithLabelValues(stage, reason).Inc()
		if a.tracer != nil {
			span := trace.SpanFromContext(m.Context())
			span.RecordError(err)
			span.SetStatus(codes.Error, "dead-lettered: "+err.Error())
		}
		log.Error(telemetry.DeadLettered, "correlationId", CorrelationID(m), "stage", stage, "reason", err.Error(),
			"deliveries", deliveries, "subject", m.Metadata.Get(MetaSubject))
		return nil, nil
	}
}

// Bounds of a dead letter's own headers (the rest of natsx.DeadLetterHeaderMax is left to the
// original's headers).
const (
	deadLetterReasonMax  = 1000
	deadLetterSubjectMax = 512
	deadLetterOwnMax     = 4 << 10 // stage, reason, deliveries, subject, stream, sequence, sizes, trace
	deadLetterCopyMax    = natsx.DeadLetterHeaderMax - deadLetterOwnMax
)

// buildDeadLetter is m's dead letter: at most natsx.DeadLetterBodyMax bytes of its body and
// natsx.DeadLetterHeaderMax of headers, whatever m's size.
func buildDeadLetter(stage string, m *message.Message, err error, deliveries int) *message.Message {
	body := m.Payload
	excerpt := len(body) > natsx.DeadLetterBodyMax
	if excerpt {
		body = body[:natsx.DeadLetterBodyMax]
	}
	dl := NewMessage(events.DeadLetterSubject(stage), "dlq:"+m.Metadata.Get(MetaStream)+":"+m.Metadata.Get(MetaSequence), body)
	// The original's headers (correlation and causation ids first, then the rest in order),
	// each whole, as many as fit.
	keys := slices.Sorted(maps.Keys(m.Metadata))
	slices.SortStableFunc(keys, func(x, y string) int { return cmp.Compare(headerRank(x), headerRank(y)) })
	budget, dropped := deadLetterCopyMax, 0
	for _, k := range keys {
		v := m.Metadata[k]
		if strings.HasPrefix(k, "_") || strings.HasPrefix(k, "Nats-") {
			continue // in-process keys; JetStream's own headers (expectations) would refuse the dead letter
		}
		if n := len(k) + len(v) + 4; n <= budget {
			dl.Metadata.Set(k, v)
			budget -= n
		} else {
			dropped++
		}
	}
	dl.Metadata.Set(events.HeaderDLQStage, truncate(stage, 128))
	dl.Metadata.Set(events.HeaderDLQReason, truncate(err.Error(), deadLetterReasonMax))
	dl.Metadata.Set(events.HeaderDLQDeliveries, strconv.Itoa(deliveries))
	dl.Metadata.Set(events.HeaderDLQSubject, truncate(m.Metadata.Get(MetaSubject), deadLetterSubjectMax))
	dl.Metadata.Set(events.HeaderDLQStream, truncate(m.Metadata.Get(MetaStream), 64))
	dl.Metadata.Set(events.HeaderDLQSequence, m.Metadata.Get(MetaSequence))
	if excerpt {
		dl.Metadata.Set(events.HeaderDLQBodySize, strconv.Itoa(len(m.Payload)))
	}
	if dropped > 0 {
		dl.Metadata.Set(events.HeaderDLQHeadersDropped, strconv.Itoa(dropped))
	}
	return dl
}

// headerRank orders the headers a dead letter keeps first.
func headerRank(k string) int {
	switch k {
	case events.HeaderCorrelationID:
		return 0
	case events.HeaderCausationID:
		return 1
	case events.HeaderTraceParent, "tracestate":
		return 2
	}
	return 3
}

func (a *App) observe(name string, h chainFunc) chainFunc {
	handled := a.metrics.handled.WithLabelValues(name, "ok")
	failed := a.metrics.handled.WithLabelValues(name, "error")
	later := a.metrics.handled.WithLabelValues(name, "later")
	latency := a.metrics.latency.WithLabelValues(name)
	return func(m *message.Message) ([]*message.Message, error) {
		// Handlers get a logger naming the handler and message; they add the domain ids they
		// decode (correlation id included), so the runtime's own lines add it themselves.
		handlerLog := a.log.With("handler", name, "msgId", m.UUID)
		m.SetContext(logx.WithLogger(m.Context(), handlerLog))
		log := handlerLog.With("correlationId", CorrelationID(m))
		start := time.Now()
		out, err := h(m)
		latency.Observe(time.Since(start).Seconds())
		if IsLater(err) {
			later.Inc()
			log.Info("message handed back, to be decided again after its backoff", "reason", err, "deliveries", Deliveries(m))
			return out, err
		}
		if err != nil {
			failed.Inc()
			a.failed.Add(1)
			log.Warn("handler failed; message will be redelivered", "err", err, "deliveries", Deliveries(m))
			return out, err
		}
		handled.Inc()
		a.handled.Add(1)
		return out, nil
	}
}

// traced starts one span per delivered message, named after the handler, as a child of the
// trace context in the message's headers, and puts it in the message's context for the layers
// inside (outputs, dead letters, the handler's own calls). Off, it is not installed.
func (a *App) traced(name string, h chainFunc) chainFunc {
	if a.tracer == nil {
		return h
	}
	return func(m *message.Message) ([]*message.Message, error) {
		ctx := tracing.Propagator().Extract(m.Context(), propagation.MapCarrier(m.Metadata))
		ctx, span := a.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			tracing.AttrMessagingSystem.String("nats"), tracing.AttrDestination.String(m.Metadata.Get(MetaSubject)),
			tracing.AttrStream.String(m.Metadata.Get(MetaStream)), tracing.AttrCorrelationID.String(CorrelationID(m)),
			tracing.AttrHandler.String(name)))
		m.SetContext(ctx)
		out, err := h(m)
		tracing.EndSpan(span, err)
		return out, err
	}
}

// injectTrace writes the handler's span into every message it produces, so the next hop's
// span is its child. Off, it is not installed.
func (a *App) injectTrace(h chainFunc) chainFunc {
	if a.tracer == nil {
		return h
	}
	return func(m *message.Message) ([]*message.Message, error) {
		out, err := h(m)
		for _, o := range out {
			tracing.Propagator().Inject(m.Context(), propagation.MapCarrier(o.Metadata))
		}
		return out, err
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
