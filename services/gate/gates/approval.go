package gates

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/approval"
	"github.com/worldgate/worldgate/services/gate/route"
)

// approvalGate holds destructive proposals (requiresApproval) in the approvals bucket until a
// person decides with `worldgate proposals approve|reject` (package approval); the input is
// acknowledged once the proposal is stored, and a notice goes to proposals.approval. A proposal
// that does not require approval passes.
type approvalGate struct {
	store  *approval.Store
	expiry time.Duration
}

func newApproval(d Deps) (Gate, error) {
	if d.JetStream == nil {
		return nil, errors.New("the approval gate needs JetStream (KV bucket for held proposals)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := approval.Open(ctx, d.JetStream)
	if err != nil {
		return nil, err
	}
	return &approvalGate{store: store.WithClock(d.Now), expiry: d.Config.Approval.Expiry}, nil
}

func (*approvalGate) Name() string { return route.Approval }

func (g *approvalGate) Check(_ context.Context, p *events.Proposal) (Decision, error) {
	info, _ := events.LookupKind(p.Kind)
	if !p.RequiresApproval && !info.Destructive {
		return Pass(), nil
	}
	return Hold(), nil
}

// Hold implements Holder.
func (g *approvalGate) Hold(ctx context.Context, p *events.Proposal) error {
	if err := g.store.Hold(ctx, p, g.expiry); err != nil {
		return fmt.Errorf("approvals store unavailable: %w", err)
	}
	return nil
}
