package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/attest"
)

// CommitGate is the name the event-processor gives itself in its refusals, published on
// proposals.rejected.processor: it refuses at commit what every gate of the route passed.
const CommitGate = "processor"

// AlreadyAnswered is what the event-processor's refusal of a second answer to one triggering
// event says (apply.AlreadyAnswered): that event has its answer, so it is not answered again.
const AlreadyAnswered = "already has its committed answer"

// Why a rejection could not be verified: the bounded reason label of
// worldgate_ai_rejections_unverified_total.
const (
	// UnverifiedSubject: the body names another gate than the subject it was published on
	// (NATS lets only a gate's own user publish on proposals.rejected.<gate>).
	UnverifiedSubject = "subject"
	// UnverifiedBody: the rejection names another proposal, kind or role than it carries.
	UnverifiedBody = "body"
	// UnverifiedRoute: the rejecting gate is not on the route of the proposal's kind.
	UnverifiedRoute = "route"
	// UnverifiedTrail: the hops before the rejecting gate are missing or their signatures do
	// not verify with the gates' public keys.
	UnverifiedTrail = "trail"
	// UnverifiedEmitter: the schema gate attested another emitter than the role.
	UnverifiedEmitter = "emitter"
	// UnverifiedNotSent: refused at the first gate, and not a proposal this worker sent.
	UnverifiedNotSent = "not_sent"
)

// NoteUnverified is Rejected's note for a rejection it could not verify: dropped, nothing
// regenerated, retried or published.
const NoteUnverified = "unverifiable rejection dropped"

// NoteAnswered is Rejected's note for the event-processor's refusal of an answer to an event
// that already has its committed answer.
const NoteAnswered = "the event already has its committed answer"

// Unverified says why a rejection is not believed.
type Unverified struct {
	Reason string // one of the Unverified* labels
	Gate   string // the rejecting gate as the metric labels it (a gate of a route, processor, or other)
	Why    string // a sentence
}

func (u *Unverified) Error() string { return u.Why }

// verifyRejection checks that rej, received on subject, is a refusal that a gate of the
// proposal's route (or the event-processor, after the whole route) made of a proposal emitter
// really sent:
//
//   - the gate is the one whose subject it was published on (proposals.rejected.<gate>: only
//     that gate's NATS user may publish there) and it is on the route of the proposal's kind;
//   - the hops before the rejecting gate are exactly the route's gates up to it, each signed
//     by its gate over this very content (attest.Keyring), the schema gate's attesting emitter:
//     what the ai-worker never sent has no valid schema signature;
//   - refused at the first gate, where nothing is signed yet: the proposal is one this worker
//     emitted (an LLM role's content digest was recorded as it was proposed; a deterministic
//     role's proposal id is the one it derives from the triggering event). The narrator's own
//     proposals refused there are believed: nothing is regenerated for them.
func (a *Agent) verifyRejection(ctx context.Context, subject string, rej *events.Rejection, emitter string, recorded bool) *Unverified {
	p := rej.Proposal
	gate, _ := strings.CutPrefix(subject, events.RejectedSubject(""))
	route, err := a.routeFor(emitter, p.Kind)
	label := "other"
	if gate == CommitGate || slices.Contains(route, gate) {
		label = gate
	}
	fail := func(reason, format string, args ...any) *Unverified {
		return &Unverified{Reason: reason, Gate: label, Why: fmt.Sprintf(format, args...)}
	}
	switch {
	case gate == "" || gate != rej.Gate:
		return fail(UnverifiedSubject, "the rejection names the %s gate but was published on %s, which only the %s gate's user may publish to", rej.Gate, subject, gate)
	case rej.ProposalID != p.ProposalID || rej.Kind != p.Kind || (rej.AgentRole != "" && rej.AgentRole != p.AgentRole):
		return fail(UnverifiedBody, "the rejection names proposal %s (%s, %s) but carries %s (%s, %s)", rej.ProposalID, rej.Kind, rej.AgentRole, p.ProposalID, p.Kind, p.AgentRole)
	case err != nil:
		return fail(UnverifiedRoute, "the rejected proposal's kind has no route: %v", err)
	}
	k := len(route)
	if gate != CommitGate {
		if k = slices.Index(route, gate); k < 0 {
			return fail(UnverifiedRoute, "the %s gate is not on the route of %s (%s)", gate, p.Kind, strings.Join(route, " → "))
		}
	}
	before := route[:k]
	if len(before) > 0 {
		if a.cfg.Keyring == nil {
			return fail(UnverifiedTrail, "the gates' public keys are not configured (-attest-keys), so the hops before the %s gate cannot be verified", gate)
		}
		if err := a.cfg.Keyring.Verify(p, before, events.GateApproval, events.GateSchema); err != nil {
			return fail(UnverifiedTrail, "the hops before the %s gate do not prove that the proposal passed %s: %v", gate, strings.Join(before, " → "), err)
		}
	}
	if slices.Contains(before, events.GateSchema) {
		if got := attestedEmitter(p); got != emitter {
			return fail(UnverifiedEmitter, "the schema gate attested emitter %q, not %s", got, emitter)
		}
		return nil
	}
	// Nothing signed before the rejecting gate: was it ours?
	switch {
	case emitter == events.EmitterNarrator:
		return nil
	case !recorded:
		if want := ProposalID(emitter, p.CausationID, p.Attempt); p.ProposalID != want || p.AgentRole != emitter {
			return fail(UnverifiedNotSent, "proposal %s is not the one %s derives for event %s at attempt %d (%s)", p.ProposalID, emitter, p.CausationID, p.Attempt, want)
		}
		return nil
	}
	digest, err := attest.Digest(p)
	if err != nil {
		return fail(UnverifiedNotSent, "the rejected proposal cannot be digested: %v", err)
	}
	sent, err := a.cfg.Cache.Get(ctx, sentKey(p.ProposalID))
	switch {
	case errors.Is(err, ErrMiss):
		return fail(UnverifiedNotSent, "this worker has no record of sending proposal %s (never sent, or sent longer ago than the AI cache keeps)", p.ProposalID)
	case err != nil:
		return fail(UnverifiedNotSent, "the record of proposal %s cannot be read: %v", p.ProposalID, err)
	case string(sent) != digest:
		return fail(UnverifiedNotSent, "proposal %s is not the content this worker sent under that id (digest %s, sent %s)", p.ProposalID, digest, sent)
	}
	return nil
}

// routeFor is the route emitter's proposals of kind travel.
func (a *Agent) routeFor(emitter, kind string) ([]string, error) {
	if r, ok := a.cfg.Routes.(interface {
		ForEmitter(emitter, kind string) ([]string, error)
	}); ok {
		return r.ForEmitter(emitter, kind)
	}
	return a.cfg.Routes.For(kind)
}

// attestedEmitter is the emitter the schema gate's passing hop attests.
func attestedEmitter(p *events.Proposal) string {
	for _, h := range p.Route.Trail {
		if h.Gate == events.GateSchema && h.Outcome == events.OutcomePassed {
			return h.Emitter
		}
	}
	return ""
}

func sentKey(proposalID string) string { return "sent." + sum(proposalID)[:40] }

// recordSent keeps the content digest of a proposal an LLM role sends, so that a refusal of it
// at the first gate, before any gate has signed it, can be told from a forged one.
func (a *Agent) recordSent(ctx context.Context, p *events.Proposal) error {
	digest, err := attest.Digest(p)
	if err != nil {
		return err
	}
	if err := a.cfg.Cache.Put(ctx, sentKey(p.ProposalID), []byte(digest)); err != nil {
		return fmt.Errorf("remember proposal %s as sent: %w", p.ProposalID, err)
	}
	return nil
}

// dropUnverified counts and logs a rejection that is not believed; nothing follows from it.
func (a *Agent) dropUnverified(ctx context.Context, rej *events.Rejection, u *Unverified) *Result {
	a.m.unverified.WithLabelValues(u.Gate, u.Reason).Inc()
	a.logger(ctx).Warn("unverifiable rejection dropped", "proposalId", rej.ProposalID, "correlationId", rej.CorrelationID,
		"gate", rej.Gate, "code", string(rej.Code), "check", u.Reason, "reason", u.Why)
	return &Result{Note: NoteUnverified}
}
