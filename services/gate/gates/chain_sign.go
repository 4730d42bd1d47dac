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
