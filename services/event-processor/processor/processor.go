// Package processor is the event-processor's use case: it consumes validated proposals, applies
// each one's domain event to the world graph exactly once (package apply builds the
// traversal), and returns the committed event — or, when a commit-time rule fails, a
// structured rejection — for the worker runtime to publish before it acknowledges the input.
//
// It is the only writer of the graph. It knows nothing of acks, retries or dead letters (the
// runtime wraps it), and nothing of how the graph connection is configured (shared/graphx).
//
// Exactly once: the traversal writes the event's marker in the same transaction as the change
// and records which input message (stream and sequence) decided it. A redelivered message
// finds its own marker, writes nothing and publishes the same event again under the same
// Nats-Msg-Id (JetStream drops the copy). A duplicate proposal — the same proposal in another
// message — finds a marker another message wrote and is acknowledged without publishing: that
// other message publishes (it is redelivered until it has).
package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/event-processor/apply"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/telemetry"
)

// Name is the handler name and the durable consumer on PROPOSALS; also the gate name on
// rejections (proposals.rejected.processor) and the dead-letter stage.
const Name = "event-processor"

// Gate is the gate name the processor's rejections carry.
const Gate = "processor"

// DefaultMaxInFlight is how many proposals of one partition the processor applies at once by
// default: a replica that owns all 16 partitions applies up to 512 (plus the legacy durable's),
// one of three replicas about 170. What is applied at once shares graph requests (MaxBatch), so
// a replica with a few partitions needs this many for its requests to carry several writes
// (docs/performance.md: with three replicas on 2 cores, 32 against 8 took requests from 5 to
// 7 writes and saturation from 1482–1678 to 1829–1847 moves/s).
const DefaultMaxInFlight = 32

// Graph is what the processor needs of the graph connection (*graphx.Conn, with write
// credentials).
type Graph interface {
	Submit(ctx context.Context, build func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal) ([]any, error)
	Ping(ctx context.Context) error
}

// Deps are the processor's dependencies and knobs.
type Deps struct {
	Graph Graph
	// Keyring holds the gates' public keys: a proposal is committed only if every gate of its
	// kind's configured route (Routes) passed it, in order, with a valid signature over exactly
	// the content committed (package attest). Required.
	Keyring *attest.Keyring
	// Routes are the configured routes; nil: route.Default().
	Routes     *events.Routes
	Registerer prometheus.Registerer
	Logger     *slog.Logger

	// MaxInFlight is how many proposals of one partition are applied at once (each partition
	// consumer's MaxAckPending). Default DefaultMaxInFlight. Proposals of one actor apply one at
	// a time in stream order, whatever the replicas (one partition, one replica at a time, and
	// the consumer's OrderKey within it): a world file — one actor, the world loader — applies
	// its entities before the exits and NPCs that reference them, and a player's moves apply in
	// the order proposed. Proposals of different actors apply concurrently, which lets graphd
	// share one fsync among them (group commit). 1 applies each partition in stream order.
	MaxInFlight int
	// MaxBatch is how many proposals' writes one graph request carries at most (default
	// DefaultMaxBatch; 1: one request per proposal). The processor sends the writes of the
	// proposals it applies at the same moment together (committer): none waits for a batch to
	// fill, so at a low rate each goes alone.
	MaxBatch int
	// AckWait is how long a crashed processor's message stays invisible before redelivery.
	// Default 10s. A live processor keeps the proposals it holds in progress (for up to the
	// runtime's MaxHold, 2 minutes), so AckWait need not cover a slow graph.
	AckWait time.Duration
	// Backoff between redeliveries while the graph is unavailable. Default 500ms, 1s, 2s, 5s,
	// then 10s repeating.
	Backoff []time.Duration
	// ServerErrorLimit is how many deliveries a proposal the graph server refuses (an error
	// response, not an outage) gets before it is dead-lettered. Default 20. Transport failures
	// (graph down, timeouts) are retried up to runtime.MaxDeliverLimit deliveries (about a day
	// at the 10 s backoff): an outage must not dead-letter good proposals.
	ServerErrorLimit int
	// Diversity sizes the diversity metrics' windows (zero: DefaultDiversity).
	Diversity DiversityConfig
}

// Processor applies validated proposals. Build it with New.
type Processor struct {
	d      Deps
	log    *slog.Logger
	m      *procMetrics
	div    *Diversity
	commit *committer
}

// New returns a Processor; it refuses missing dependencies.
func New(d Deps) (*Processor, error) {
	switch {
	case d.Graph == nil:
		return nil, errors.New("event-processor: a graph connection is required")
	case d.Registerer == nil:
		return nil, errors.New("event-processor: a metrics registerer is required")
	case d.Logger == nil:
		return nil, errors.New("event-processor: a logger is required")
	case d.Keyring == nil:
		return nil, errors.New("event-processor: the gates' public keys are required (-attest-keys): nothing is committed without attested gate decisions")
	}
	// A route may name the built-in gates and any gate whose key the processor holds (a gate
	// defined beyond them, on its registry: services/gate/gates.Registry.Define).
	if d.Routes == nil {
		r := route.Default()
		d.Routes = &r
	} else if err := d.Routes.Validate(append(route.Known(), d.Keyring.Gates()...)); err != nil {
		return nil, err
	}
	if d.MaxInFlight <= 0 {
		d.MaxInFlight = DefaultMaxInFlight
	}
	if d.MaxBatch <= 0 {
		d.MaxBatch = DefaultMaxBatch
	}
	if d.AckWait <= 0 {
		d.AckWait = 10 * time.Second
	}
	if len(d.Backoff) == 0 {
		d.Backoff = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}
	}
	if d.ServerErrorLimit <= 0 {
		d.ServerErrorLimit = 20
	}
	m := newMetrics(d.Registerer)
	return &Processor{d: d, log: d.Logger, m: m, div: NewDiversity(d.Registerer, d.Diversity),
		commit: newCommitter(d.Graph, d.MaxBatch, m.batchSize)}, nil
}

// Register builds a Processor from d and registers its handler on app. Add p.Ready to the
// admin server's readiness checks: it fails while the graph is unreachable.
func Register(app *runtime.App, d Deps) (*Processor, error) {
	p, err := New(d)
	if err != nil {
		return nil, err
	}
	if app == nil {
		return nil, errors.New("event-processor: a runtime app is required")
	}
	app.Handle(Name, p.Consumer(), p.Handle)
	return p, nil
}

// Consumer is what the processor reads: the partitions of the validated proposals on
// PROPOSALS, one durable consumer each (event-processor-p00, …), each consumed by one replica
// at a time, so that replicas share the commits and one actor's proposals (one partition, and
// the OrderKey within it) apply in the order proposed, whatever the replicas. Its own durable,
// event-processor, drains proposals.validated, where gates put validated proposals before
// partitioned commits. MaxDeliver is the largest the runtime allows because the runtime dead-letters at MaxDeliver
// whatever the cause: the processor bounds server-refused proposals itself (ServerErrorLimit)
// and lets outages retry until the graph is back, for about a day at the 10 s backoff; after
// that the proposal is dead-lettered (never redelivered for ever).
func (p *Processor) Consumer() runtime.Consumer {
	return runtime.Consumer{
		Stream:        events.StreamProposals,
		Durable:       Name,
		MaxDeliver:    runtime.MaxDeliverLimit,
		Backoff:       p.d.Backoff,
		AckWait:       p.d.AckWait,
		MaxAckPending: p.d.MaxInFlight,
		OrderKey:      events.ActorKey,
		Partitioned: &runtime.Partitioned{Count: natsx.ProposalPartitions, Filter: events.ValidatedPartition,
			Legacy: []string{events.SubjectValidatedLegacy}},
	}
}

// Ready reports whether the graph answers; use it as the /readyz check "graph".
func (p *Processor) Ready(ctx context.Context) error {
	if err := p.d.Graph.Ping(ctx); err != nil {
		return fmt.Errorf("graph: %w", err)
	}
	return nil
}

// Handle applies one validated proposal and returns the messages to publish before the input
// is acknowledged. It returns an ordinary error to have the proposal redelivered later (the
// graph is unavailable) and a runtime.Permanent error for a message no retry can fix.
func (p *Processor) Handle(msg *message.Message) ([]*message.Message, error) {
	ctx := msg.Context()
	log := logx.From(ctx, p.log)
	// Decoded strictly but not validated against the JSON Schemas again: verify (below) proves
	// the schema gate validated exactly this content, and apply decodes the payload strictly.
	prop, err := events.Decoder{}.AttestedProposal(msg.Payload)
	if err != nil {
		return nil, runtime.Permanentf("not a valid proposal: %w", err)
	}
	log = log.With("proposalId", prop.ProposalID, "kind", prop.Kind, "correlationId", prop.CorrelationID)
	source := msg.Metadata.Get(runtime.MetaStream) + ":" + msg.Metadata.Get(runtime.MetaSequence)
	if len(prop.Route.Pending) > 0 {
		// Not a graph decision, so nothing to record: the same input always gets the same answer.
		rej := p.rejection(prop, events.CodeRouteInvalid,
			fmt.Sprintf("the proposal reached proposals.validated with gates still pending (%v); it must pass them first", prop.Route.Pending), nil)
		p.m.rejected.WithLabelValues(prop.Kind, string(events.CodeRouteInvalid)).Inc()
		return []*message.Message{rej}, nil
	}
	if !events.ProposalSchemaAccepted(prop.SchemaVersion) {
		p.m.rejected.WithLabelValues(prop.Kind, string(events.CodeSchemaInvalid)).Inc()
		return []*message.Message{p.rejection(prop, events.CodeSchemaInvalid, events.OldSchemaVersionReason(prop.SchemaVersion),
			map[string]any{"schemaVersion": prop.SchemaVersion, "want": events.ProposalSchemaVersion})}, nil
	}
	if rej := p.verify(prop); rej != nil {
		p.m.rejected.WithLabelValues(prop.Kind, string(events.CodeAttestationInvalid)).Inc()
		log.Warn(telemetry.CommitRefused, "code", string(events.CodeAttestationInvalid), "hop", rej.Hop, "reason", rej.Reason)
		return []*message.Message{p.rejection(prop, events.CodeAttestationInvalid, rej.Reason, map[string]any{"hop": rej.Hop})}, nil
	}
	cmds, err := apply.Build(prop)
	if err != nil {
		return nil, runtime.Permanentf("proposal %s cannot be applied: %w", prop.ProposalID, err)
	}
	now := time.Now().UTC()
	stamp := now.Format(time.RFC3339Nano)
	var out []*message.Message
	committedNow := false
	for _, c := range cmds {
		meta := apply.Meta{ProposalID: prop.ProposalID, CorrelationID: prop.CorrelationID, CommittedUTC: stamp, Source: source}
		start := time.Now()
		d, err := p.commit.apply(ctx, apply.Item{Command: c, Meta: meta})
		if isDecode(err) {
			return nil, runtime.Permanentf("apply %s %s: %w", c.Type, c.EventID, err)
		}
		if err != nil {
			p.m.graphErrors.WithLabelValues(errClass(err)).Inc()
			if graphx.IsServer(err) && runtime.Deliveries(msg) >= p.d.ServerErrorLimit {
				return nil, runtime.Permanentf("the graph refused %s %s %d times: %w", c.Type, c.EventID, runtime.Deliveries(msg), err)
			}
			return nil, fmt.Errorf("apply %s %s: %w", c.Type, c.EventID, err)
		}
		fresh := d.CommittedUTC == stamp && d.Source == source
		if fresh {
			p.m.commitLatency.WithLabelValues(prop.Kind).Observe(time.Since(start).Seconds())
		}
		if source != ":" && d.Source != source {
			// Another message carrying the same proposal decided this event; it publishes.
			p.m.duplicates.WithLabelValues(prop.Kind).Inc()
			log.Info("duplicate proposal: event already decided by another message", "eventId", c.EventID, "decidedBy", d.Source)
			continue
		}
		if !d.Applied {
			if fresh {
				p.m.rejected.WithLabelValues(prop.Kind, string(events.CodeCommitConflict)).Inc()
				log.Warn(telemetry.CommitRefused, "code", string(events.CodeCommitConflict), "eventId", c.EventID, "reason", d.Reason)
			}
			out = append(out, p.rejection(prop, events.CodeCommitConflict, d.Reason, map[string]any{"eventId": c.EventID, "type": c.Type}))
			continue
		}
		committed, err := time.Parse(time.RFC3339Nano, d.CommittedUTC)
		if err != nil {
			committed = now
		}
		evt := events.DomainEvent{
			EventID: c.EventID, Type: c.Type, ProposalID: prop.ProposalID, Kind: prop.Kind,
			CorrelationID: prop.CorrelationID, CausationID: prop.ProposalID,
			OccurredUTC: occurred(prop), CommittedUTC: committed, Payload: c.Payload,
		}
		body, err := json.Marshal(evt)
		if err != nil {
			return nil, runtime.Permanentf("encode %s: %w", c.Type, err)
		}
		m := runtime.NewMessage(events.CommittedSubject(c.Type), c.EventID, body)
		m.Metadata.Set(events.HeaderCorrelationID, prop.CorrelationID)
		m.Metadata.Set(events.HeaderCausationID, prop.ProposalID)
		m.Metadata.Set(events.HeaderType, c.Type)
		out = append(out, m)
		// The request's final outcome, published once the domain event is stored: a watcher that
		// sees the outcome finds the event committed, and the COMMITTED log keeps the order in
		// which the world changed. (Published together, an outcome was stored while a NATS node
		// that led COMMITTED was down; the event, stored on the redelivery, came after a later
		// move of the same player's: chaos counted it as out of order.)
		o, ob, err := events.EncodeCommittedOutcome(prop, evt)
		if err != nil {
			return nil, runtime.Permanentf("outcome of %s: %w", prop.ProposalID, err)
		}
		out = append(out, runtime.After(runtime.EncodedOutcomeMessage(o, ob)))
		if fresh {
			committedNow = true
			p.m.committed.WithLabelValues(prop.Kind).Inc()
			p.m.pipeline.WithLabelValues(prop.Kind).Observe(now.Sub(occurred(prop)).Seconds())
			log.Info(telemetry.CommitApplied, "eventId", c.EventID, "type", c.Type)
		} else {
			log.Info("event already applied by this message before; publishing it again", "eventId", c.EventID)
		}
	}
	if committedNow {
		p.div.Observe(prop) // what players get: measured once, by the commit that made it content
	}
	return out, nil
}

// verify checks the proposal's attested trail against its kind's configured route (for the
// narrator emitter, as the schema gate attested it, the narrator's route of it: safety, no
// replay; a forged emitter fails the schema hop's signature).
func (p *Processor) verify(prop *events.Proposal) *attest.Refusal {
	emitter := ""
	for _, h := range prop.Route.Trail {
		if h.Gate == events.GateSchema && h.Outcome == events.OutcomePassed {
			emitter = h.Emitter
			break
		}
	}
	want, err := p.d.Routes.ForEmitter(emitter, prop.Kind)
	if err != nil {
		return &attest.Refusal{Reason: err.Error()}
	}
	err = p.d.Keyring.Verify(prop, want, events.GateApproval, events.GateSchema)
	if err == nil {
		return nil
	}
	var r *attest.Refusal
	if errors.As(err, &r) {
		return r
	}
	return &attest.Refusal{Reason: err.Error()}
}

// occurred is when the world event behind the proposal happened (else when it was proposed).
func occurred(p *events.Proposal) time.Time {
	if p.OriginUTC != nil {
		return p.OriginUTC.UTC()
	}
	return p.CreatedUTC.UTC()
}

func (p *Processor) rejection(prop *events.Proposal, code events.Code, reason string, details map[string]any) *message.Message {
	r := events.Rejection{
		ProposalID: prop.ProposalID, Kind: prop.Kind, Gate: Gate, Code: code, Reason: reason, Details: details,
		CorrelationID: prop.CorrelationID, AgentRole: prop.AgentRole, Attempt: prop.Attempt,
		RejectedUTC: time.Now().UTC(), Proposal: prop,
	}
	body, _ := json.Marshal(r) // plain structs: cannot fail
	m := runtime.NewMessage(events.RejectedSubject(Gate), prop.ProposalID+":"+Gate+":rejected", body)
	m.Metadata.Set(events.HeaderCorrelationID, prop.CorrelationID)
	m.Metadata.Set(events.HeaderCausationID, prop.ProposalID)
	m.Metadata.Set(events.HeaderType, prop.Kind)
	return m
}

func errClass(err error) string {
	switch {
	case graphx.IsServer(err):
		return "server"
	case graphx.IsTransport(err):
		return "transport"
	}
	return "other"
}

type procMetrics struct {
	committed     *prometheus.CounterVec
	pipeline      *prometheus.HistogramVec
	commitLatency *prometheus.HistogramVec
	rejected      *prometheus.CounterVec
	duplicates    *prometheus.CounterVec
	graphErrors   *prometheus.CounterVec
	batchSize     prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *procMetrics {
	return &procMetrics{
		committed: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "proposals_committed_total",
			Help: "Proposals whose domain event was applied to the graph, by proposal kind.",
		}, []string{"kind"})),
		pipeline: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Name: "pipeline_latency_seconds",
			Help:    "From the world event (proposal originUtc, else createdUtc) to its commit in the graph, by proposal kind.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"kind"})),
		commitLatency: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Name: "commit_latency_seconds",
			Help: "Time from a proposal's apply to its decision: its graph request (one transaction, shared with the proposals applied at the same moment) and the wait for it, by proposal kind.", Buckets: metrics.DurationBuckets,
		}, []string{"kind"})),
		rejected: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "commit_rejections_total",
			Help: "Proposals refused by the event-processor at commit time, by kind and code.",
		}, []string{"kind", "code"})),
		duplicates: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "commit_duplicates_total",
			Help: "Proposals that arrived again in another message after their event was decided, by kind.",
		}, []string{"kind"})),
		graphErrors: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "graph_errors_total",
			Help: "Failed graph requests of the event-processor, by class (transport: unreachable/timeout, retried without limit; server: refused).",
		}, []string{"class"})),
		batchSize: metrics.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Name: "commit_batch_size",
			Help:    "Proposals whose writes one graph request of the event-processor carried (-max-batch at most).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		})),
	}
}
