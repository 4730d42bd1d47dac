package gates

import (
	"context"
	"fmt"
)

// step is one gate's part of a run: decide (the chain's own checks, then the gate's), keep a
// retry ticket for a transient refusal, record and sign the decision on the routing slip
// (holding the proposal when the gate holds it), then count and log it. The gate's latency is
// observed by the caller, which knows when its outgoing message is built; the count and the log
// line are returned (report) for the caller to make once the run has succeeded.
func (c *chain) step(r *run) (step, func(), error) {
	g, subject, raw, p, start := r.g, r.subject, r.raw, r.p, r.start
	name := g.Name()
	ctx := context.WithValue(r.ctx, subjectKey{}, subject)
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
	next, err := c.record(ctx, r, d, now, took)
	if err != nil {
		return step{}, nil, err
	}
	return step{gate: g, d: d, at: now}, func() { c.report(ctx, name, p, d, took, next) }, nil
}
