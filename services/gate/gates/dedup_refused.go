package gates

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// DedupRejectionsDurable is the dedup gate's durable consumer of every rejection
// (proposals.rejected.>), and the stage of its dead letters.
const DedupRejectionsDurable = "gate-dedup-rejections"

// CommitGate is the name the event-processor gives itself in its refusals at commit
// (COMMIT_CONFLICT, ATTESTATION_INVALID, …), published on proposals.rejected.processor: it
// refuses what every gate of the route passed.
const CommitGate = "processor"

// forgetRefused is the handler of DedupRejectionsDurable: the fingerprint of content refused
// for good after this gate — by a gate running in another process, or by the event-processor
// at commit — is removed (forget), so that the regeneration of that content is not refused as
// a duplicate of something nobody will see. Which rejections count is refusedAfterDedup's
// rule. Forgetting is idempotent: where this gate ran fused with the refusing gate, the run
// forgot already (RefusedLater), and a redelivered rejection finds nothing more to remove.
//
// A rejection that names another gate than its subject's, or another proposal than it
// carries, is dead-lettered with the reason and forgets nothing; so is one that is not JSON
// every reader reads the same way (events.CheckJSON).
func (g *dedup) forgetRefused(routes events.Routes, log *slog.Logger) message.HandlerFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		subject := m.Metadata.Get(runtime.MetaSubject)
		p, err := refusedAfterDedup(routes, subject, m.Payload)
		if err != nil {
			return nil, runtime.Permanent(err)
		}
		if p == nil {
			return nil, nil
		}
		forgot, err := g.forget(m.Context(), p)
		if err != nil {
			return nil, fmt.Errorf("forget the fingerprint of proposal %s, refused on %s: %w", p.ProposalID, subject, err)
		}
		if forgot {
			logx.From(m.Context(), log).Debug("fingerprint of content refused after the dedup gate forgotten",
				"proposalId", p.ProposalID, "kind", p.Kind, "subject", subject)
		}
		return nil, nil
	}
}

// refusedAfterDedup reads the rejection data received on subject and returns the proposal
// whose fingerprint it asks to forget, nil when it asks nothing of the dedup gate:
//
//   - the refusal is final (not Transient: a rate or audit refusal brings the same proposal
//     back once its wait is over, and it may yet commit);
//   - the refusing gate comes after the dedup gate on a route the proposal's kind travels, or
//     is the event-processor (CommitGate) refusing a kind whose route passes the dedup gate;
//     a gate before the dedup gate refused what never reached it.
//
// The refusing gate is the subject's (proposals.rejected.<gate>: only that gate's NATS user may
// publish there), never the body's alone: a rejection whose body names another gate, or whose
// proposal is not the one it names, is an error, and so is data with duplicate members.
func refusedAfterDedup(routes events.Routes, subject string, data []byte) (*events.Proposal, error) {
	gate, ok := strings.CutPrefix(subject, events.RejectedSubject(""))
	if !ok || gate == "" || strings.ContainsAny(gate, ".*>") {
		return nil, fmt.Errorf("the message on %s is not a rejection: rejections come on proposals.rejected.<gate>", subject)
	}
	if err := events.CheckJSON("rejection", data); err != nil {
		return nil, fmt.Errorf("the rejection on %s is not readable: %w", subject, err)
	}
	var rej events.Rejection
	if err := json.Unmarshal(data, &rej); err != nil {
		return nil, fmt.Errorf("the rejection on %s is not readable: %w", subject, err)
	}
	if rej.Gate != gate {
		return nil, fmt.Errorf("the rejection on %s names the %q gate: only the %s gate's user may publish there, so it is not believed and forgets nothing", subject, rej.Gate, gate)
	}
	p := rej.Proposal
	switch {
	case rej.Transient:
		return nil, nil // the same proposal comes back
	case p == nil:
		return nil, nil // nothing to identify its fingerprint by
	case rej.ProposalID != p.ProposalID || rej.Kind != p.Kind:
		return nil, fmt.Errorf("the rejection on %s names proposal %s (%s) but carries %s (%s), so it forgets nothing", subject, rej.ProposalID, rej.Kind, p.ProposalID, p.Kind)
	}
	route, err := routes.For(p.Kind)
	if err != nil {
		return nil, nil // no route: never fingerprinted here
	}
	candidates := [][]string{route}
	if events.EmitterMay(events.EmitterNarrator, p.Kind) {
		candidates = append(candidates, events.NarratorRoute(route))
	}
	for _, r := range candidates {
		at := slices.Index(r, Dedup)
		if at < 0 {
			continue
		}
		if gate == CommitGate || slices.Index(r, gate) > at {
			return p, nil
		}
	}
	return nil, nil
}
