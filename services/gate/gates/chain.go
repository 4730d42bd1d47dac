package gates

import (
	"context"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/slip"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/metrics"
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

// step is one gate's decision in a run, recorded and signed on the slip (or left for the
// run's signature: chain_sign.go).
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
// The steps of a run are in chain_*.go, one concern a file: decoding the incoming message
// (chain_decode.go), the checks every gate makes and the gate's own (chain_decide.go), the
// retry ticket of a transient refusal and the decision's hop (chain_step.go), signing it on the
// slip (chain_sign.go), what leaves the process (chain_send.go), forgetting a proposal refused
// further on (chain_forget.go), counting and logging (chain_report.go).
func (c *chain) handler(first Gate) message.HandlerFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		r, err := c.begin(first, m)
		if err != nil {
			return nil, err
		}
		for {
			s, report, err := c.step(r)
			if err != nil {
				return nil, err
			}
			if r.id == "" {
				// The run's outgoing id is its first gate's, whatever gate ends the run: a
				// redelivery that decides differently further on is still stored once, as a
				// single gate's pass, reject and hold share its id (slip.MsgID).
				r.id = slip.MsgID(r.p, r.g.Name())
			}
			next := c.fusedNext(s, r.p)
			if next == nil {
				return c.finish(r, s, report)
			}
			if err := c.continueInto(r, next, s, report); err != nil {
				return nil, err
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
