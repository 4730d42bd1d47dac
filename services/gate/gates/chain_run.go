package gates

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/runtime"
)

// run is one message's way through the gates of the process: the gate deciding now, the
// proposal as that gate gets it, and what the run keeps until its outgoing message is built.
type run struct {
	ctx     context.Context
	p       *events.Proposal
	g       Gate      // the gate deciding now
	subject string    // the subject g gets the proposal on
	raw     []byte    // the message as g would get it, for a RawGate; nil once decoded strictly
	start   time.Time // when g began
	id      string    // the outgoing message id: the run's first gate's (slip.MsgID)
	digest  string    // of the content, which no gate of the run changes: computed once
	// signFrom is the first hop of the trail the next signature covers: the run's first, or
	// the one after the last hop it signed (chain_sign.go).
	signFrom int
	// Each decision is counted, timed and logged once the run has its outgoing message: a run
	// that fails part-way (an outage at a later gate) is redelivered and decided again, and
	// must not count its earlier gates' decisions twice.
	reports []func()
	passed  []Gate // the run's gates that passed, before the last one
}

// begin starts the run of message m at its first gate: the proposal decoded for it
// (decodeFor), the delivery and the content digest in the context the gates decide in.
func (c *chain) begin(first Gate, m *message.Message) (*run, error) {
	p, strict, err := decodeFor(first, m.Payload)
	if err != nil {
		return nil, err
	}
	r := &run{p: p, g: first, subject: m.Metadata.Get(runtime.MetaSubject), raw: m.Payload, start: c.now(), signFrom: len(p.Route.Trail)}
	if strict {
		r.raw = nil // decoded strictly already: the schema gate checks the decoded proposal
	}
	r.ctx = withDigest(withDelivery(m.Context(), runtime.Deliveries(m), c.maxDeliver), p, &r.digest)
	return r, nil
}

// continueInto goes on into next, the route's next gate, which runs in this process (fusion),
// after the current gate passed (s): next gets the proposal as it would have arrived on its
// own subject, and the current gate's decision is reported with the run's.
func (c *chain) continueInto(r *run, next Gate, s step, report func()) error {
	r.passed = append(r.passed, r.g)
	latency, took := c.latency[r.g.Name()], s.at.Sub(r.start)
	r.reports = append(r.reports, report, func() { latency.Observe(took.Seconds()) })
	r.g, r.subject, r.start = next, events.GateSubject(next.Name()), s.at
	if _, ok := next.(RawGate); ok {
		// What the passing gate would have published (slip.Forward).
		raw, err := json.Marshal(r.p)
		if err != nil {
			return runtime.Permanentf("gate %s: encode proposal %s: %v", next.Name(), r.p.ProposalID, err)
		}
		r.raw = raw
	}
	return nil
}

// finish ends the run with its last step s: builds the outgoing message (send), has the gates
// the run passed forget a proposal refused for good (forgetRefused), then counts, logs and
// times every decision of the run.
func (c *chain) finish(r *run, s step, report func()) ([]*message.Message, error) {
	msgs, err := c.send(s, r.p, r.id)
	if err != nil {
		return nil, err
	}
	if err := forgetRefused(r.ctx, r.passed, s, r.p); err != nil {
		return nil, err
	}
	latency, took := c.latency[r.g.Name()], c.now().Sub(r.start)
	for _, f := range append(r.reports, report) {
		f()
	}
	latency.Observe(took.Seconds())
	return msgs, nil
}
