package gates

import (
	"context"
	"fmt"

	"github.com/worldgate/worldgate/events"
)

// forgetRefused tells the gates a run passed (Forgetter) that a later gate of the same run,
// whose step is s, refused proposal p for good, so that what they remember of it does not
// outlive it. A transient refusal is not the end of the proposal: it comes back to the refusing
// gate once its wait is over (retry tickets) and may yet commit, so the gates it passed
// remember it, as they do when they run apart.
func forgetRefused(ctx context.Context, passed []Gate, s step, p *events.Proposal) error {
	if s.d.Outcome != Rejected || s.d.Transient {
		return nil
	}
	for _, pg := range passed {
		if f, ok := pg.(Forgetter); ok {
			if err := f.RefusedLater(ctx, p); err != nil {
				return fmt.Errorf("gate %s: forget proposal %s, refused by the %s gate: %w", pg.Name(), p.ProposalID, s.gate.Name(), err)
			}
		}
	}
	return nil
}
