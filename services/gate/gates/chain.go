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
	"github.com/worldgate/worldgate/events/slip"
	"github.com/worldgate/worldgate/shared/attest"
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

// chain turns gates into runtime handlers.
type chain struct {
	m          *chainMetrics
	log        *slog.Logger
	now        func() time.Time
	maxDeliver int
	tickets    *tickets
	signers    map[string]*attest.Signer
	latency    map[string]prometheus.Observer // gate_latency_seconds of each gate of the process
	// fused are the gates of this process that a run may continue into, by name; nil when
	// fusion is off (every gate hops through JetStream).
	fused map[string]Gate
}

// step is one gate's decision in a run, recorded and signed on the slip.
type step struct {
	gate Gate
	d    Decision
	at   time.Time
}

// handler is the gate's runtime handler. It decodes the proposal and lets the gate decide;
// while the gate passes and the route's next gate runs in this process too (fusion), that gate
// decides next, on the proposal as it would have arrived on its own subject. Each decision is
// recorded, signed, counted and logged as if it were a hop of its own; only the last one leaves
// the process: to the next remote gate, proposals.validated, the hold notice or the rejection.
func (c *chain) handler(first Gate) message.HandlerFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		g, start := first, c.now()
		subject, raw := m.Metadata.Get(runtime.MetaSubject), m.Payload
		p, strict, err := decodeFor(g, m.Payload)
		if err != nil {
			return nil, err
		}
		if strict {
			raw = nil // decoded strictly already: the schema gate checks the decoded proposal
		}
		ctx := withDelivery(m.Context(), runtime.Deliveries(m), c.maxDeliver)
		var id string
		var digest string // of the content, which no gate of the run changes: computed once
		ctx = withDigest(ctx, p, &digest)
		// Each decision is counted, timed and logged once the run has its outgoing message: a
		// run that fails part-way (an outage at a later gate) is redelivered and decided again,
		// and must not count its earlier gates' decisions twice.
		var reports []func()
		var passed []Gate // the run's gates that passed, before the last one
		for {
			s, report, err := c.step(ctx, g, subject, raw, p, start, &digest)
			if err != nil {
				return nil, err
			}
			if id == "" {
				// The run's outgoing id is its first gate's, whatever gate ends the run: a
				// redelivery that decides differently further on is still stored once, as a
				// single gate's pass, reject and hold share its id (slip.MsgID).
				id = slip.MsgID(p, g.Name())
			}
			next := c.fusedNext(s, p)
			if next == nil {
				msgs, err := c.send(s, p, id)
				if err != nil {
					return nil, err
				}
				if s.d.Outcome == Rejected && !s.d.Transient {
					// A transient refusal is not the end of the proposal: it comes back to the
					// refusing gate once its wait is over (retry tickets) and may yet commit, so
					// the gates it passed remember it, as they do when they run apart.
					for _, pg := range passed {
						if f, ok := pg.(Forgetter); ok {
							if err := f.RefusedLater(ctx, p); err != nil {
								return nil, fmt.Errorf("gate %s: forget proposal %s, refused by the %s gate: %w", pg.Name(), p.ProposalID, s.gate.Name(), err)
							}
						}
					}
				}
				latency, took := c.latency[g.Name()], c.now().Sub(start)
				for _, r := range append(reports, report) {
					r()
				}
				latency.Observe(took.Seconds())
				return msgs, nil
			}
			passed = append(passed, g)
			latency, took := c.latency[g.Name()], s.at.Sub(start)
			reports = append(reports, report, func() { latency.Observe(took.Seconds()) })
			g, subject, start = next, events.GateSubject(next.Name()), s.at
			if _, ok := next.(RawGate); ok {
				// What the passing gate would have published (slip.Forward).
				if raw, err = json.Marshal(p); err != nil {
					return nil, runtime.Permanentf("gate %s: encode proposal %s: %v", g.Name(), p.ProposalID, err)
				}
			}
		}
	}
}

// fusedNext is the gate the run continues into after s: the route's next gate when s passed
// and that gate runs in this process; nil when the proposal leaves the process.
func (c *chain) fusedNext(s step, p *events.Proposal) Gate {
	if c.fused == nil || s.d.Outcome != Passed || len(p.Route.Pending) == 0 {
		return nil
	}
	return c.fused[p.Route.Pending[0]]
}

// step is one gate's part of a run: decide (the chain's own checks, then the gate's), keep a
// retry ticket for a transient refusal, record and sign the decision on the routing slip
// (holding the proposal when the gate holds it), then count and log it. The gate's latency is
// observed by the caller, which knows when its outgoing message is built; the count and the log
// line are returned (report) for the caller to make once the run has succeeded.
func (c *chain) step(ctx context.Context, g Gate, subject string, raw []byte, p *events.Proposal, start time.Time, digest *string) (step, func(), error) {
	name := g.Name()
	ctx = context.WithValue(ctx, subjectKey{}, subject)
	d, err := c.decide(ctx, g, subject, raw, p)
	if err != nil {
		return step{}, nil, err
	}
	if d.Outcome == Settled {
		// Decided already further on: nothing to record, sign or send.
		now := c.now()
		took := now.Sub(start)
		return step{gate: g, d: d, at: now}, func() { c.report(ctx, name, p, d, took, "") }, nil
	}
	if d.Outcome == Rejected && d.Transient {
		if err := c.tickets.issue(ctx, name, p); err != nil {
			return step{}, nil, fmt.Errorf("gate %s: retry ticket of proposal %s: %w", name, p.ProposalID, err)
		}
	}
	now := c.now()
	took := now.Sub(start)
	next, err := c.record(ctx, g, subject, p, d, now, took, digest)
	if err != nil {
		return step{}, nil, err
	}
	return step{gate: g, d: d, at: now}, func() { c.report(ctx, name, p, d, took, next) }, nil
}

// send builds what the run publishes, from its last step: the proposal to its next hop
// (passed), the notice that it waits (held), or the rejection, with the run's id.
func (c *chain) send(s step, p *events.Proposal, id string) ([]*message.Message, error) {
	name := s.gate.Name()
	var out slip.Message
	var err error
	switch s.d.Outcome {
	case Settled:
		return nil, nil // acknowledged: it went on the first time
	case Passed:
		out, err = slip.Forward(p, name)
	case Held:
		out, err = slip.Forward(p, name)
		// A notice that it waits: distinct id, so the decision forwarded later is not
		// mistaken for a duplicate of it.
		out.Subject, id = events.SubjectApproval, id+":held"
	default:
		out, err = slip.Rejected(slip.Rejection(p, name, s.d.Verdict, s.at))
	}
	if err != nil {
		return nil, runtime.Permanent(err)
	}
	msg := runtime.NewMessage(out.Subject, id, out.Data)
	msg.Metadata.Set(events.HeaderCorrelationID, out.CorrelationID)
	msg.Metadata.Set(events.HeaderType, out.Kind)
	return []*message.Message{msg}, nil
}

// decodeFor decodes the message for the run's first gate g. A gate that checks the proposal as
// it arrived (RawGate: the schema gate) gets it decoded strictly, once, when that succeeds
// (strict: true); otherwise, and for every other gate, it is decoded plainly (decodeProposal)
// and the gate finds what is wrong with it.
func decodeFor(g Gate, payload []byte) (p *events.Proposal, strict bool, err error) {
	if _, ok := g.(RawGate); ok {
		if p, err := (events.Decoder{}).Proposal(payload); err == nil && proposalIDPattern.MatchString(p.ProposalID) {
			return p, true, nil
		}
	}
	p, err = decodeProposal(g.Name(), payload)
	return p, false, err
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

// record writes the decision on the routing slip, signs it with the gate's key, and has a
// holding gate keep the proposal. It returns where the decision sends the proposal: its next
// hop (passed), the hold notice (held) or the gate's rejection subject. digest is the content's
// attest.Digest, computed by the run's first signature and reused by the gates after it.
func (c *chain) record(ctx context.Context, g Gate, subject string, p *events.Proposal, d Decision, now time.Time, took time.Duration, digest *string) (string, error) {
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
		return "", runtime.Permanentf("gate %s held a proposal but cannot hold (a defect in the gate)", name)
	}
	slip.Record(p, hop)
	if name == Schema {
		p.Route.Trail[len(p.Route.Trail)-1].Emitter, _ = events.EmitterOf(subject)
	}
	if *digest == "" {
		var err error
		if *digest, err = attest.Digest(p); err != nil {
			return "", runtime.Permanentf("gate %s: digest of %s: %v", name, p.ProposalID, err)
		}
	}
	if err := c.signers[name].SignLastWith(p, *digest); err != nil {
		return "", runtime.Permanentf("gate %s: sign the decision on %s: %v", name, p.ProposalID, err)
	}
	switch d.Outcome {
	case Passed:
		return p.Next(), nil
	case Held:
		if err := h.Hold(ctx, p); err != nil {
			return "", fmt.Errorf("gate %s: hold proposal %s: %w", name, p.ProposalID, err)
		}
		return events.SubjectApproval, nil
	}
	return events.RejectedSubject(name), nil
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
	switch d.Outcome {
	case Settled:
		log.Info("proposal came back to the gate after it was decided further on: acknowledged, not forwarded", "reason", d.Reason)
		return
	case Rejected:
		log.Info(telemetry.GateRejected, "code", string(d.Code), "reason", d.Reason, "transient", d.Transient)
	default:
		log.Info(map[Outcome]string{Passed: telemetry.GatePassed, Held: telemetry.GateHeld}[d.Outcome], "next", next)
	}
}
