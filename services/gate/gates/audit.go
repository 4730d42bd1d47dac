package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/tracing"
)

// audit writes the audit record of a proposal to audit.proposals and lets the proposal go on
// only after JetStream has acknowledged the record: nothing is persisted without its audit
// trail.
//
// When the record cannot be written, the failure is first treated as an infrastructure error
// (redelivered with backoff, like every other gate's), because most such failures are brief. On
// the last delivery the gate rejects with AUDIT_UNAVAILABLE (transient, retryAfter) instead of
// dead-lettering: the proposal does not proceed, and its author learns why.
type audit struct {
	js  jetstream.JetStream
	now func() time.Time
}

// Audit is the audit gate's name.
const Audit = events.GateAudit

// auditGate declares the audit gate (see Spec).
var auditGate = Spec{
	Name: Audit, New: newAudit,
	Summary: "writes the audit record and waits for its acknowledgement",
	Publish: []string{events.SubjectAuditProposals},
}

func newAudit(_ context.Context, d Deps) (Gate, error) {
	if d.JetStream == nil {
		return nil, errors.New("the audit gate needs JetStream (stream " + events.StreamAudit + ")")
	}
	return &audit{js: d.JetStream, now: d.Now}, nil
}

func (*audit) Name() string { return Audit }

// AuditRecord is what audit.proposals carries per proposal attempt.
type AuditRecord struct {
	ProposalID    string       `json:"proposalId"`
	Kind          string       `json:"kind"`
	CorrelationID string       `json:"correlationId"`
	CausationID   string       `json:"causationId"`
	AgentRole     string       `json:"agentRole"`
	Actor         events.Actor `json:"actor"`
	Attempt       int          `json:"attempt"`
	// Version 2: Digest is the proposal's attested content digest (attest.Digest), the one its
	// trail's signatures sign, so a record can be checked against them. Records without a
	// version hold the SHA-256 of the whole canonical proposal, trail included.
	Version    int                `json:"version,omitempty"`
	Digest     string             `json:"digest"`
	Trail      []events.Hop       `json:"trail"`
	Provenance *events.Provenance `json:"provenance,omitempty"`
	AuditedUTC time.Time          `json:"auditedUtc"`
}

// auditRecord is the pure part: the record of p.
func auditRecord(p *events.Proposal, digest string, at time.Time) AuditRecord {
	return AuditRecord{
		ProposalID: p.ProposalID, Kind: p.Kind, CorrelationID: p.CorrelationID, CausationID: p.CausationID,
		AgentRole: p.AgentRole, Actor: p.Actor, Attempt: p.Attempt, Version: AuditRecordVersion, Digest: digest,
		Trail: p.Route.Trail, Provenance: p.Provenance, AuditedUTC: at.UTC(),
	}
}

// AuditRecordVersion is the version of the records the audit gate writes (AuditRecord.Version).
const AuditRecordVersion = 2

// RecordsTrail: the record holds the trail, every hop of it signed (TrailRecorder).
func (g *audit) RecordsTrail() {}

func (g *audit) Check(ctx context.Context, p *events.Proposal) (Decision, error) {
	digest, err := ContentDigest(ctx, p)
	if err != nil {
		return Decision{}, fmt.Errorf("digest of proposal %s: %w", p.ProposalID, err)
	}
	data, err := json.Marshal(auditRecord(p, digest, g.now()))
	if err != nil {
		return Decision{}, err
	}
	msg := &nats.Msg{Subject: events.SubjectAuditProposals, Data: data, Header: nats.Header{}}
	msg.Header.Set(events.HeaderCorrelationID, p.CorrelationID)
	msg.Header.Set(events.HeaderType, p.Kind)
	tracing.Inject(ctx, msg.Header) // the record points to the audit gate's span (nothing when tracing is off)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = g.js.PublishMsg(pctx, msg, jetstream.WithMsgID("audit:"+p.ProposalID+":"+strconv.Itoa(p.Attempt)))
	if err == nil {
		return Pass(), nil
	}
	if n, limit := Delivery(ctx); n < limit {
		return Decision{}, fmt.Errorf("audit record not written: %w", err)
	}
	return RejectTransient(events.CodeAuditUnavailable,
		fmt.Sprintf("The audit record could not be written (%v), so the proposal was stopped before persistence: propose it again later.", err),
		map[string]any{"error": err.Error()}, 30), nil
}
