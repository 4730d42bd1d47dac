package events

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// Code is a stable rejection code. Dashboards and agents match on it; never rename one.
type Code string

// Rejection codes.
const (
	CodeSchemaInvalid      Code = "SCHEMA_INVALID"
	CodeSafetyFlagged      Code = "SAFETY_FLAGGED"
	CodeInvariantViolation Code = "INVARIANT_VIOLATION"
	CodeDuplicate          Code = "DUPLICATE"
	CodeReplayIncomplete   Code = "REPLAY_INCOMPLETE"
	CodeRateLimited        Code = "RATE_LIMITED"
	CodeApprovalDenied     Code = "APPROVAL_DENIED"
	CodeApprovalExpired    Code = "APPROVAL_EXPIRED"
	CodeAuditUnavailable   Code = "AUDIT_UNAVAILABLE"
	CodeCommitConflict     Code = "COMMIT_CONFLICT"
	CodeRouteInvalid       Code = "ROUTE_INVALID"
	// CodeAttestationInvalid: the event-processor found a gate of the kind's configured route
	// whose signed decision is missing, forged, out of order, or over other content; Details
	// "hop" names that gate.
	CodeAttestationInvalid Code = "ATTESTATION_INVALID"
)

// Rejection says why a gate (or the event-processor, gate "processor") refused a proposal.
// Reason is a sentence a person understands; Details carries machine-readable specifics.
// A Transient rejection may succeed if retried after RetryAfter seconds.
type Rejection struct {
	ProposalID    string         `json:"proposalId"`
	Kind          string         `json:"kind"`
	Gate          string         `json:"gate"`
	Code          Code           `json:"code"`
	Reason        string         `json:"reason"`
	Details       map[string]any `json:"details,omitempty"`
	Transient     bool           `json:"transient"`
	RetryAfter    float64        `json:"retryAfter,omitempty"`
	CorrelationID string         `json:"correlationId"`
	AgentRole     string         `json:"agentRole,omitempty"`
	Attempt       int            `json:"attempt"`
	RejectedUTC   time.Time      `json:"rejectedUtc"`
	Proposal      *Proposal      `json:"proposal,omitempty"`
}

// DomainEvent is a change applied to the canonical world, published once on
// CommittedSubject(Type). EventID is derived from the proposal (see DomainEventID).
type DomainEvent struct {
	EventID       string          `json:"eventId"`
	Type          string          `json:"type"`
	ProposalID    string          `json:"proposalId"`
	Kind          string          `json:"kind,omitempty"`
	CorrelationID string          `json:"correlationId"`
	CausationID   string          `json:"causationId,omitempty"`
	OccurredUTC   time.Time       `json:"occurredUtc"`
	CommittedUTC  time.Time       `json:"committedUtc"`
	Payload       json.RawMessage `json:"payload"`
}

// eventNamespace makes DomainEventID's UUIDv5s Worldgate's own.
var eventNamespace = uuid.MustParse("6f1c3f4e-5d1a-4c59-9b0e-8e2f0a7c1d11")

// DomainEventID is the deterministic id of the n-th domain event a proposal produces, so a
// redelivered proposal maps to the same event and the apply-once marker recognises it.
func DomainEventID(proposalID string, n int) string {
	return uuid.NewSHA1(eventNamespace, []byte(proposalID+"/"+strconv.Itoa(n))).String()
}

// MarkerID is the graph vertex id of a domain event's apply-once marker: "evt:" + the
// deterministic event id. The event-processor writes the marker when it applies (or refuses)
// the event; the invariant gate reads it to settle a proposal whose event was already decided.
func MarkerID(eventID string) string { return "evt:" + eventID }
