package gates

import (
	"encoding/json"
	"regexp"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/runtime"
)

// The incoming message: a proposal the run can route and reject, or a dead letter.

var proposalIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:._-]{0,127}$`)

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
