package events

import (
	"encoding/json"
	"time"
)

// Details of a DUPLICATE rejection (the dedup gate's): the accepted proposal the refused content
// near-duplicates and, when the gate kept it, that proposal's content, which the request may be
// answered with instead of a regeneration (a reused Outcome).
const (
	DetailDuplicateOf = "duplicateOf" // the accepted proposal's id
	DetailAcceptedUTC = "acceptedUtc" // when the dedup gate accepted it (RFC 3339)
	DetailReusable    = "reusable"    // its payload (an object), when the gate kept it
)

// DuplicateDetails are the details of a DUPLICATE rejection: the accepted proposal, when it
// was accepted, its payload (nil when the gate did not keep it), the SimHash distance and the
// gate's limit.
func DuplicateDetails(acceptedID string, accepted time.Time, payload json.RawMessage, distance, maxDistance int) map[string]any {
	d := map[string]any{DetailDuplicateOf: acceptedID, DetailAcceptedUTC: accepted.UTC().Format(time.RFC3339Nano),
		"distance": distance, "maxDistance": maxDistance}
	if len(payload) > 0 {
		d[DetailReusable] = payload
	}
	return d
}

// Reusable is the accepted content a DUPLICATE rejection offers in place of a regeneration:
// ok only when r is a DUPLICATE that names the accepted proposal, when it was accepted, and
// carries its payload, valid for the refused proposal's kind and about the same target (the
// dedup scope). EventID is the domain event that commits the accepted content.
func (r *Rejection) Reusable() (Reuse, bool) {
	if r == nil || r.Code != CodeDuplicate || r.Details == nil {
		return Reuse{}, false
	}
	id, _ := r.Details[DetailDuplicateOf].(string)
	at, _ := r.Details[DetailAcceptedUTC].(string)
	raw, err := json.Marshal(r.Details[DetailReusable])
	if id == "" || err != nil || r.Details[DetailReusable] == nil {
		return Reuse{}, false
	}
	when, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return Reuse{}, false
	}
	if ValidatePayload(r.Kind, raw) != nil {
		return Reuse{}, false
	}
	if r.Proposal != nil {
		mine, err1 := DecodePayload(r.Kind, r.Proposal.Payload)
		theirs, err2 := DecodePayload(r.Kind, raw)
		if err1 != nil || err2 != nil || mine.Target() != theirs.Target() {
			return Reuse{}, false
		}
	}
	return Reuse{ProposalID: id, EventID: DomainEventID(id, 0), AcceptedUTC: when, Payload: raw}, true
}
