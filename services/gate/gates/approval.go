package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/approval"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/runtime"
)

// DecisionsDurable is the approval gate's durable consumer of people's decisions
// (events.SubjectDecisions), and the stage of their dead letters.
const DecisionsDurable = "gate-approval-decisions"

// approvals holds destructive proposals (requiresApproval) in the approvals bucket until a
// person decides with `worldgate proposals approve|reject` (package approval); the input is
// acknowledged once the proposal is stored, and a notice goes to proposals.approval. A proposal
// that does not require approval passes.
type approvals struct {
	store  *approval.Store
	expiry time.Duration
}

// Approval is the approval gate's name.
const Approval = events.GateApproval

// approvalGate declares the approval gate (see Spec).
var approvalGate = Spec{
	Name: Approval, New: newApproval,
	Summary: "destructive kinds wait for a person (`worldgate proposals approve|reject`)",
	// Held proposals; the expiry lists them (Watch).
	Buckets: []natsauth.Bucket{{Name: natsx.BucketApprovals, Watch: true}},
	// The notice that a proposal waits.
	Publish: []string{events.SubjectApproval},
	// People's decisions, published by operators on proposals.decisions.<operator>.
	Consumers: []Consumer{{
		Durable: DecisionsDurable, Subjects: []string{events.SubjectDecisionsAll, events.SubjectDecisions},
		MovesOn: true, // an approved proposal goes on to the gate after this one
		Handler: func(g Gate, d Deps) (message.HandlerFunc, error) {
			a := g.(*approvals)
			a.store = a.store.WithSigner(d.Signers[Approval])
			return a.decisions(d.Logger), nil
		},
	}},
}

func newApproval(ctx context.Context, d Deps) (Gate, error) {
	if d.JetStream == nil {
		return nil, errors.New("the approval gate needs JetStream (KV bucket for held proposals)")
	}
	var store *approval.Store
	if err := natsx.Await(ctx, "approvals bucket", d.Logger, func(ctx context.Context) (err error) {
		store, err = approval.Open(ctx, d.JetStream)
		return err
	}); err != nil {
		return nil, err
	}
	return &approvals{store: store.WithClock(d.Now), expiry: d.Config.Approval.Expiry}, nil
}

func (*approvals) Name() string { return Approval }

func (g *approvals) Check(_ context.Context, p *events.Proposal) (Decision, error) {
	info, _ := events.LookupKind(p.Kind)
	if !p.RequiresApproval && !info.Destructive {
		return Pass(), nil
	}
	return Hold(), nil
}

// Hold implements Holder.
func (g *approvals) Hold(ctx context.Context, p *events.Proposal) error {
	if err := g.store.Hold(ctx, p, g.expiry); err != nil {
		return fmt.Errorf("approvals store unavailable: %w", err)
	}
	return nil
}

// decisions applies the decisions people publish (approval.Store.Request): the only way a held
// proposal moves on. A decision that comes too late changes nothing; one that cannot be read,
// or names no held proposal, is dead-lettered with the reason.
func (g *approvals) decisions(log *slog.Logger) message.HandlerFunc {
	return func(m *message.Message) ([]*message.Message, error) {
		var d approval.Decision
		if err := json.Unmarshal(m.Payload, &d); err != nil {
			return nil, runtime.Permanentf("approval decision is not decodable: %v", err)
		}
		// Who decides is the operator whose subject the decision came on (the NATS server lets
		// each operator's user publish only there), never the body's "by".
		operator, ok := events.OperatorOf(m.Metadata.Get(runtime.MetaSubject))
		if !ok {
			return nil, runtime.Permanentf("approval decision on %s refused: decisions come on proposals.decisions.<operator>, so that the approver is the authenticated operator", m.Metadata.Get(runtime.MetaSubject))
		}
		d.By = operator
		if err := d.Validate(); err != nil {
			return nil, runtime.Permanentf("approval decision refused: %v", err)
		}
		r, err := g.store.Apply(m.Context(), d)
		log := logx.From(m.Context(), log).With("proposalId", d.ProposalID, "decidedBy", d.By, "decision", string(d.Status))
		switch {
		case errors.Is(err, approval.ErrAlreadyDecided):
			log.Info("approval decision arrived after the proposal was decided; nothing to do", "status", string(r.Status), "by", r.DecidedBy)
			return nil, nil
		case errors.Is(err, approval.ErrNotFound):
			return nil, runtime.Permanentf("approval decision for proposal %s, which is not held", d.ProposalID)
		case err != nil:
			return nil, fmt.Errorf("apply the approval decision on %s: %w", d.ProposalID, err)
		}
		log.Info("approval decision applied", "status", string(r.Status))
		return nil, nil
	}
}
