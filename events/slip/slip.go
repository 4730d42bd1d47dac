// Package slip is the routing-slip mechanics every gate outcome shares: recording a hop,
// popping the gate, choosing the next subject, building a structured rejection, and the
// deterministic message id. The gate runtime and the approval decisions (made later by a
// person) both use it, so a proposal moves the same way whoever moves it.
//
// Pure: it builds messages, it does not publish them. It lives in the events module, below the
// services, because more than one service moves proposals along their routes (the gate service,
// and `worldgate proposals approve|reject` through services/gate/approval); it needs nothing but
// package events.
package slip

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/worldgate/worldgate/events"
)

// Message is an outcome ready to publish: subject, deterministic Nats-Msg-Id, body and the
// headers Worldgate messages carry.
type Message struct {
	Subject       string
	ID            string
	Data          []byte
	CorrelationID string
	Kind          string
}

// MsgID is the Nats-Msg-Id of gate's outcome for this attempt of the proposal, called once
// the outcome's hop is in the trail. Pass, reject and hold share it on purpose: within the
// stream's duplicate window a gate's outcome for one attempt is stored once, even if a
// redelivery decided differently. A later decision of the same gate on the same attempt (on a
// retry after a transient refusal, or a person's decision on a held proposal) is a new round
// with its own id (…:r1, …:r2), which a redelivery of that round repeats.
func MsgID(p *events.Proposal, gate string) string {
	id := p.ProposalID + ":" + strconv.Itoa(p.Attempt) + ":" + gate
	if n := round(p, gate); n > 0 {
		id += ":r" + strconv.Itoa(n)
	}
	return id
}

// round is how many times gate decided on the proposal before the newest hop.
func round(p *events.Proposal, gate string) int {
	n := -1
	for _, h := range p.Route.Trail {
		if h.Gate == gate {
			n++
		}
	}
	return max(n, 0)
}

// Hop is a gate's decision about a proposal, as Record writes it into the trail.
type Hop struct {
	Gate    string
	Outcome string      // events.OutcomePassed, OutcomeRejected, OutcomeHeld, OutcomeApproved
	Code    events.Code // a rejection's code
	At      time.Time
	Took    time.Duration // how long the decision took (a person's: how long the proposal waited)
}

// Record appends h to p's trail. A decision (every outcome but held) also removes the gate
// from Pending when it is the head; a held proposal keeps the gate pending until a person
// decides.
func Record(p *events.Proposal, h Hop) {
	p.Route.Trail = append(p.Route.Trail, events.Hop{
		Gate: h.Gate, Outcome: h.Outcome, Code: string(h.Code), At: h.At.UTC(),
		DurationMs: float64(h.Took.Microseconds()) / 1000,
	})
	if h.Outcome != events.OutcomeHeld && len(p.Route.Pending) > 0 && p.Route.Pending[0] == h.Gate {
		p.Route.Pending = append(make([]string, 0, len(p.Route.Pending)-1), p.Route.Pending[1:]...)
	}
}

// Forward is the proposal on its way to its next hop (Proposal.Next) after gate.
func Forward(p *events.Proposal, gate string) (Message, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return Message{}, fmt.Errorf("encode proposal %s: %w", p.ProposalID, err)
	}
	return Message{Subject: p.Next(), ID: MsgID(p, gate), Data: data, CorrelationID: p.CorrelationID, Kind: p.Kind}, nil
}

// Verdict is what a refusing gate says.
type Verdict struct {
	Code       events.Code
	Reason     string
	Details    map[string]any
	Transient  bool
	RetryAfter float64
}

// Rejection builds gate's structured rejection of p (p embedded, its trail complete).
func Rejection(p *events.Proposal, gate string, v Verdict, at time.Time) *events.Rejection {
	return &events.Rejection{
		ProposalID: p.ProposalID, Kind: p.Kind, Gate: gate, Code: v.Code, Reason: v.Reason,
		Details: v.Details, Transient: v.Transient, RetryAfter: v.RetryAfter,
		CorrelationID: p.CorrelationID, AgentRole: p.AgentRole, Attempt: p.Attempt,
		RejectedUTC: at.UTC(), Proposal: p,
	}
}

// Rejected is the rejection as a message to proposals.rejected.<gate>.
func Rejected(r *events.Rejection) (Message, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return Message{}, fmt.Errorf("encode rejection of %s: %w", r.ProposalID, err)
	}
	id := r.ProposalID + ":" + strconv.Itoa(r.Attempt) + ":" + r.Gate
	if r.Proposal != nil {
		id = MsgID(r.Proposal, r.Gate)
	}
	return Message{Subject: events.RejectedSubject(r.Gate), ID: id, Data: data, CorrelationID: r.CorrelationID, Kind: r.Kind}, nil
}
