package gates

import (
	"context"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/telemetry"
)

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
