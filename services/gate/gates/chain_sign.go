package gates

import (
	"context"
	"fmt"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/slip"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/runtime"
)

// record writes the decision on the routing slip, signs it with the gate's key, and has a
// holding gate keep the proposal. It returns where the decision sends the proposal: its next
// hop (passed), the hold notice (held) or the gate's rejection subject.
//
// Gates of one process that share one key (attest.GenerateShared) sign a run of their
// decisions once: a passing gate whose next gate continues the run in this process with the
// same key leaves its hop unsigned, and the signature of the run's last decision covers it
// (attest.RunVersion), so the event-processor verifies one signature per process rather than
// one per gate. A gate that keeps the trail it gets (TrailRecorder: the audit gate, in its
// record) gets the run so far signed, and the run's last signature replaces that one. The
// digest of the content is computed by the run's first signature and reused.
func (c *chain) record(ctx context.Context, r *run, d Decision, now time.Time, took time.Duration) (string, error) {
	g, subject, p := r.g, r.subject, r.p
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
	if d.Outcome == Passed {
		if next := c.nextSharingKey(name, p); next != nil {
			if _, records := next.(TrailRecorder); records {
				// next keeps the trail it gets: it gets the run so far signed. The run's last
				// signature replaces this one and covers these hops too.
				if err := c.sign(r, name); err != nil {
					return "", err
				}
			}
			return p.Next(), nil // the run's signature covers this hop
		}
	}
	if err := c.sign(r, name); err != nil {
		return "", err
	}
	r.signFrom = len(p.Route.Trail)
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

// sign signs the run's hops since r.signFrom with gate's key, on the last one.
func (c *chain) sign(r *run, gate string) error {
	if r.digest == "" {
		var err error
		if r.digest, err = attest.Digest(r.p); err != nil {
			return runtime.Permanentf("gate %s: digest of %s: %v", gate, r.p.ProposalID, err)
		}
	}
	if err := c.signers[gate].SignRunWith(r.p, r.digest, r.signFrom); err != nil {
		return runtime.Permanentf("gate %s: sign the decision on %s: %v", gate, r.p.ProposalID, err)
	}
	return nil
}

// nextSharingKey is the gate after name on p's route when it decides next in this run
// (fusedNext after a pass) with name's key, so that one signature covers both decisions; nil
// otherwise.
func (c *chain) nextSharingKey(name string, p *events.Proposal) Gate {
	if c.fused == nil || len(p.Route.Pending) == 0 {
		return nil
	}
	next := c.fused[p.Route.Pending[0]]
	if next == nil {
		return nil
	}
	if signer := c.signers[next.Name()]; signer == nil || signer.KeyID() != c.signers[name].KeyID() {
		return nil
	}
	return next
}
