package gates

import (
	"context"
	"fmt"

	"github.com/worldgate/worldgate/events"
)

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
