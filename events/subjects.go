package events

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Stream names of the JetStream topology (see shared/natsx for their configuration).
const (
	StreamWorld     = "WORLD"
	StreamProposals = "PROPOSALS"
	StreamCommitted = "COMMITTED"
	StreamAudit     = "AUDIT"
	StreamDLQ       = "DLQ"
)

// Subjects that are fixed rather than derived.
const (
	SubjectWorldAll     = "world.events.>"
	SubjectCommittedAll = "world.committed.>"
	SubjectProposalsAll = "proposals.>"
	// SubjectValidatedAll is every validated proposal: each is published to
	// proposals.validated.<order token> (ValidatedSubject) and stored on its partition,
	// proposals.validated.<partition>.<order token> (the PROPOSALS stream's subject transform).
	SubjectValidatedAll = "proposals.validated.>"
	// SubjectValidatedLegacy is where validated proposals went before partitioned commits
	// (proposal schemaVersion 1 and 2 gates); the event-processor still drains it.
	SubjectValidatedLegacy = "proposals.validated"
	// SubjectValidatedEntry is what the last gate of a route publishes to: one token, the
	// proposal's order token, which the stream turns into a partition.
	SubjectValidatedEntry = "proposals.validated.*"
	// SubjectValidatedPartitions is every partition's filter (ValidatedPartition).
	SubjectValidatedPartitions = "proposals.validated.*.*"
	subjectValidatedPrefix     = "proposals.validated."
	SubjectApproval            = "proposals.approval"
	SubjectDecisions           = "proposals.decisions"
	SubjectRejectedAll         = "proposals.rejected.>"
	SubjectRetryAll            = "proposals.retry.>"
	SubjectAuditAll            = "audit.>"
	SubjectAuditProposals      = "audit.proposals"
	SubjectDeadLetterAll       = "deadletter.>"
	subjectGatePrefix          = "proposals.gate."
	subjectRejectedPrefix      = "proposals.rejected."
	subjectRetryPrefix         = "proposals.retry."
	subjectWorldPrefix         = "world.events."
	subjectCommittedPrefix     = "world.committed."
)

// Subject is where an envelope of eventType is published: world.events.<type lower-cased>,
// e.g. "Player.Moved" → "world.events.player.moved".
func Subject(eventType string) string { return subjectWorldPrefix + strings.ToLower(eventType) }

// ValidatedSubject is where the last gate of a route publishes a validated proposal whose
// order key (ActorKey: "kind:id") is key: proposals.validated.<OrderToken(key)>. The PROPOSALS
// stream stores it as proposals.validated.<partition>.<token>, the partition a function of the
// token alone (natsx.ProposalPartitions), so one actor's proposals share a partition and keep
// their order on it. A proposal without an actor passes its proposal id as key: it needs no
// order and its partition is as good as any.
func ValidatedSubject(key string) string { return subjectValidatedPrefix + OrderToken(key) }

// OrderToken is key as one subject token: 16 hexadecimal digits of its 64-bit FNV-1a hash
// (an actor id may hold dots, which a token may not).
func OrderToken(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return fmt.Sprintf("%016x", h.Sum64())
}

// ValidatedPartition is the filter of partition p's validated proposals as the PROPOSALS stream
// stores them: proposals.validated.<p>.*.
func ValidatedPartition(p int) string { return subjectValidatedPrefix + strconv.Itoa(p) + ".*" }

// IsValidated reports whether subject holds a validated proposal: a partition's, an entry's
// (before the stream's transform) or the legacy subject.
func IsValidated(subject string) bool {
	return subject == SubjectValidatedLegacy || strings.HasPrefix(subject, subjectValidatedPrefix)
}

// GateSubject is the input subject of a gate: proposals.gate.<gate>.
func GateSubject(gate string) string { return subjectGatePrefix + gate }

// RejectedSubject is where a gate publishes its rejections: proposals.rejected.<gate>.
func RejectedSubject(gate string) string { return subjectRejectedPrefix + gate }

// RetrySubject is where a transiently refused proposal is sent back to the gate that refused
// it: proposals.retry.<gate>. The gate accepts from it only the very proposal it refused (see
// the gate package's retry tickets), so sending there skips no gate.
func RetrySubject(gate string) string { return subjectRetryPrefix + gate }

// CommittedSubject is where the event-processor publishes an applied domain event:
// world.committed.<type lower-cased>.
func CommittedSubject(domainType string) string {
	return subjectCommittedPrefix + strings.ToLower(domainType)
}

// DeadLetterSubject is where a stage puts a message it cannot process: deadletter.<stage>.
func DeadLetterSubject(stage string) string { return "deadletter." + stage }

// Headers carried on Worldgate messages.
const (
	HeaderMsgID         = "Nats-Msg-Id" // JetStream de-duplication key
	HeaderCorrelationID = "Worldgate-Correlation-Id"
	// HeaderAIDowngrade is set on a proposal whose content came from a cheaper model tier
	// than its role asks for because a spending budget refused the richer one
	// ("rich→cheap: <the budget's reason>"); worldgate trace shows it.
	HeaderAIDowngrade = "Worldgate-Ai-Downgrade"
	HeaderCausationID = "Worldgate-Causation-Id"
	HeaderType        = "Worldgate-Type" // event type or proposal kind
	HeaderTraceParent = "traceparent"    // W3C trace context

	// Dead-letter headers: which stage gave up, why, after how many deliveries, and where the
	// message came from.
	HeaderDLQStage      = "Worldgate-Dlq-Stage"
	HeaderDLQReason     = "Worldgate-Dlq-Reason"
	HeaderDLQDeliveries = "Worldgate-Dlq-Deliveries"
	HeaderDLQSubject    = "Worldgate-Dlq-Subject"
	HeaderDLQStream     = "Worldgate-Dlq-Stream"
	HeaderDLQSequence   = "Worldgate-Dlq-Sequence"
)

// Emitter subjects: a new proposal enters the chain on proposals.emit.<emitter>, where
// <emitter> is the role that proposes it. Only that role's NATS user may publish there (the
// generated permissions), so the schema gate reads who proposes from the subject, never from a
// field of the body.
const (
	SubjectEmitAll     = "proposals.emit.>"
	subjectEmitPrefix  = "proposals.emit."
	subjectDecisionsTo = "proposals.decisions."
	// SubjectDecisionsAll is every operator's decisions subject (the approval gate's input).
	SubjectDecisionsAll = "proposals.decisions.>"
)

// EmitSubject is where emitter publishes new proposals: proposals.emit.<emitter>.
func EmitSubject(emitter string) string { return subjectEmitPrefix + emitter }

// EmitterOf returns the emitter of an emit subject, and false for any other subject.
func EmitterOf(subject string) (string, bool) {
	e, ok := strings.CutPrefix(subject, subjectEmitPrefix)
	if !ok || e == "" || strings.ContainsAny(e, ".*>") {
		return "", false
	}
	return e, true
}

// DecisionsSubject is where operator publishes decisions on held proposals:
// proposals.decisions.<operator>. Only that operator's NATS user may publish there, so the
// approval gate reads the approver from the subject.
func DecisionsSubject(operator string) string { return subjectDecisionsTo + operator }

// OperatorOf returns the operator of a decisions subject, and false for any other subject.
func OperatorOf(subject string) (string, bool) {
	o, ok := strings.CutPrefix(subject, subjectDecisionsTo)
	if !ok || o == "" || strings.ContainsAny(o, ".*>") {
		return "", false
	}
	return o, true
}
