package gates

import (
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/slip"
	"github.com/worldgate/worldgate/shared/runtime"
)

// send builds what the run publishes, from its last step: the proposal to its next hop
// (passed), the notice that it waits (held), or the rejection, with the run's id.
func (c *chain) send(s step, p *events.Proposal, id string) ([]*message.Message, error) {
	name := s.gate.Name()
	var out slip.Message
	var err error
	switch s.d.Outcome {
	case Settled:
		return nil, nil // acknowledged: it went on the first time
	case Passed:
		out, err = slip.Forward(p, name)
	case Held:
		out, err = slip.Forward(p, name)
		// A notice that it waits: distinct id, so the decision forwarded later is not
		// mistaken for a duplicate of it.
		out.Subject, id = events.SubjectApproval, id+":held"
	default:
		out, err = slip.Rejected(slip.Rejection(p, name, s.d.Verdict, s.at))
	}
	if err != nil {
		return nil, runtime.Permanent(err)
	}
	msg := runtime.NewMessage(out.Subject, id, out.Data)
	msg.Metadata.Set(events.HeaderCorrelationID, out.CorrelationID)
	msg.Metadata.Set(events.HeaderType, out.Kind)
	return []*message.Message{msg}, nil
}
