package gates

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/attest"
	"github.com/worldgate/worldgate/services/gate/slip"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/telemetry"
)

// chainMetrics are shared by every gate of a process (metrics.Register returns the existing
// collectors to the second gate).
type chainMetrics struct {
	decisions *prometheus.CounterVec
	latency   *prometheus.HistogramVec
}

func newChainMetrics(reg prometheus.Registerer) *chainMetrics {
	return &chainMetrics{
		decisions: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "gate_decisions_total",
			Help: "Gate decisions by gate, proposal kind, outcome (passed, rejected, held) and rejection code.",
		}, []string{"gate", "kind", "outcome", "code"})),
		latency: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Name: "gate_latency_seconds",
			Help: "Time a gate took to decide on a proposal, from decoding to the outgoing message being built.", Buckets: metrics.DurationBuckets,
		}, []string{"gate"})),
	}
}

var proposalIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:._-]{0,127}$`)

type subjectKey struct{}

// Subject is the subject the message a Check runs on arrived on (the schema gate reads the
// emitter from it).
func Subject(ctx context.Context) string {
	s, _ := ctx.Value(subjectKey{}).(string)
	return s
}

// chain turns a Gate into a runtime handler.
type chain struct {
	m          *chainMetrics
	log        *slog.Logger
	now        func() time.Time
	maxDeliver int
	tickets    *tickets
	signers    map[string]*attest.Signer
}

// handler is the gate's runtime handler, in five steps: decode the proposal, decide (the
// chain's own checks, then the gate's), keep a retry ticket for a transient refusal, record
// and sign the decision on the routing slip, then count, log and send it on.
func (c *chain) handler(g Gate) message.HandlerFunc {
	name := g.Name()
	latency := c.m.latency.WithLabelValues(name)
	return func(m *message.Message) ([]*message.Message, error) {
		start := c.now()
		p, err := decodeProposal(name, m.Payload)
		if err != nil {
			return nil, err
		}
		subject := m.Metadata.Get(runtime.MetaSubject)
		ctx := withDelivery(m.Context(), runtime.Deliveries(m), c.maxDeliver)
		ctx = context.WithValue(ctx, subjectKey{}, subject)
		d, err := c.decide(ctx, g, subject, m.Payload, p)
		if err != nil {
			return nil, err
		}
		if d.Outcome == Rejected && d.Transient {
			if err := c.tickets.issue(ctx, name, p); err != nil {
				return nil, fmt.Errorf("gate %s: retry ticket of proposal %s: %w", name, p.ProposalID, err)
			}
		}
		now := c.now()
		took := now.Sub(start)
		out, err := c.record(ctx, g, subject, p, d, now, took)
		if err != nil {
			return nil, err
		}
		latency.Observe(took.Seconds())
		c.report(m.Context(), name, p, d, took, out.Subject)
		msg := runtime.NewMessage(out.Subject, out.ID, out.Data)
		msg.Metadata.Set(events.HeaderCorrelationID, out.CorrelationID)
		msg.Metadata.Set(events.HeaderType, out.Kind)
		return []*message.Message{msg}, nil
	}
}

// decodeProposal reads the message as a proposal with an id it can be routed and rejected by;
// anything else is a dead letter.
func decodeProposal(gate string, payload []byte) (*events.Proposal, error) {
	var p events.Proposal
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, runtime.Permanentf("gate %s: the message is not a decodable proposal: %v", gate, err)
	}
	if !proposalIDPattern.MatchString(p.ProposalID) {
		return nil, runtime.Permanentf("gate %s: the message has no usable proposalId (%q), so it can be neither routed nor rejected", gate, p.ProposalID)
	}
	return &p, nil
}

// decide refuses what no gate may pass (an old schema version, a proposal whose route names
// another gate next, a retry this gate never asked for), and otherwise asks the gate.
func (c *chain) decide(ctx context.Context, g Gate, subject string, raw []byte, p *events.Proposal) (Decision, error) {
	name := g.Name()
	ticketed := true // a retry must answer this gate's own transient refusal
	if subject == events.RetrySubject(name) {
		var err error
		if ticketed, err = c.tickets.valid(ctx, name, p); err != nil {
			return Decision{}, fmt.Errorf("gate %s: retry ticket of proposal %s: %w", name, p.ProposalID, err)
		}
	}
	switch {
	case !events.ProposalSchemaAccepted(p.SchemaVersion) && p.SchemaVersion != "":
		return Reject(events.CodeSchemaInvalid, events.OldSchemaVersionReason(p.SchemaVersion), map[string]any{"schemaVersion": p.SchemaVersion, "want": events.ProposalSchemaVersion}), nil
	case len(p.Route.Pending) == 0 || p.Route.Pending[0] != name:
		next := "none"
		if len(p.Route.Pending) > 0 {
			next = p.Route.Pending[0]
		}
		return Reject(events.CodeRouteInvalid, fmt.Sprintf("The proposal reached the %s gate but its route says the next gate is %s: fill Route.Pending from the kind's configured route and publish to the subject of its first gate.", name, next),
			map[string]any{"pending": p.Route.Pending}), nil
	case !ticketed:
		return Reject(events.CodeRouteInvalid, fmt.Sprintf("The proposal came on the %s gate's retry subject, but the %s gate never refused it transiently in this form: only the very proposal a gate refused may be sent back to it, and only there.", name, name), nil), nil
	}
	var d Decision
	var err error
	if rg, ok := g.(RawGate); ok {
		d, err = rg.CheckRaw(ctx, raw, p)
	} else {
		// The schema gate validated the proposal (RawGate); the gates after it read the
		// plain decoding: only the previous gate may publish to a gate's subject (NATS
		// permissions), and its retry subject takes only what the gate refused.
		d, err = g.Check(ctx, p)
	}
	if err != nil {
		return Decision{}, fmt.Errorf("gate %s: proposal %s: %w", name, p.ProposalID, err)
	}
	return d, nil
}

// record writes the decision on the routing slip, signs it with the gate's key, and builds
// what goes out: the proposal to its next gate (passed), the hold notice (held, after the
// gate keeps it), or the rejection.
func (c *chain) record(ctx context.Context, g Gate, subject string, p *events.Proposal, d Decision, now time.Time, took time.Duration) (slip.Message, error) {
	name := g.Name()
	hop := slip.Hop{Gate: name, At: now, Took: took}
	switch d.Outcome {
	case Passed:
		hop.Outcome = events.OutcomePassed
	case Held:
		hop.Outcome = events.OutcomeHeld
	default:
		hop.Outcome, hop.Code = events.OutcomeRejected, d.Code
	}
	h, holds := g.(Holder)
	if d.Outcome == Held && !holds {
		return slip.Message{}, runtime.Permanentf("gate %s held a proposal but cannot hold (a defect in the gate)", name)
	}
	slip.Record(p, hop)
	if name == Schema {
		p.Route.Trail[len(p.Route.Trail)-1].Emitter, _ = events.EmitterOf(subject)
	}
	if err := c.signers[name].SignLast(p); err != nil {
		return slip.Message{}, runtime.Permanentf("gate %s: sign the decision on %s: %v", name, p.ProposalID, err)
	}
	var out slip.Message
	var err error
	switch d.Outcome {
	case Passed:
		out, err = slip.Forward(p, name)
	case Held:
		if err := h.Hold(ctx, p); err != nil {
			return slip.Message{}, fmt.Errorf("gate %s: hold proposal %s: %w", name, p.ProposalID, err)
		}
		out, err = slip.Forward(p, name)
		// A notice that it waits: distinct id, so the decision forwarded later is not
		// mistaken for a duplicate of it.
		out.Subject, out.ID = events.SubjectApproval, out.ID+":held"
	default:
		out, err = slip.Rejected(slip.Rejection(p, name, d.Verdict, now))
	}
	if err != nil {
		return slip.Message{}, runtime.Permanent(err)
	}
	return out, nil
}

// report counts the decision and logs it.
func (c *chain) report(ctx context.Context, name string, p *events.Proposal, d Decision, took time.Duration, next string) {
	kind := p.Kind
	if _, ok := events.LookupKind(kind); !ok {
		kind = "unknown" // bounded label set
	}
	c.m.decisions.WithLabelValues(name, kind, d.Outcome.String(), string(d.Code)).Inc()
	log := logx.From(ctx, c.log).With("gate", name, "proposalId", p.ProposalID, "correlationId", p.CorrelationID,
		"kind", p.Kind, "attempt", p.Attempt, "outcome", d.Outcome.String(), "durationMs", float64(took.Microseconds())/1000)
	if d.Outcome == Rejected {
		log.Info(telemetry.GateRejected, "code", string(d.Code), "reason", d.Reason, "transient", d.Transient)
	} else {
		log.Info(map[Outcome]string{Passed: telemetry.GatePassed, Held: telemetry.GateHeld}[d.Outcome], "next", next)
	}
}
