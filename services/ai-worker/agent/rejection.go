package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/telemetry"
)

// MaxTransientRetries bounds how often one proposal is sent again after transient refusals
// at the same gate (counted from its trail, when gates record rejected hops there).
const MaxTransientRetries = 5

// Rejected follows a gate's refusal of one of our proposals, received on subject.
//
// First it is verified (verifyRejection): a rejection that is not a refusal by a gate of the
// route (or the event-processor) of a proposal this worker sent is dropped, logged and counted,
// and costs nothing. Then:
//
//   - Transient (RATE_LIMITED, AUDIT_UNAVAILABLE, …): the same proposal goes back to the gate
//     that refused it, on that gate's retry subject (which takes only what the gate refused),
//     no earlier than RejectedUTC + RetryAfter (Result.NotBefore; the caller waits), with a
//     message id derived from the rejection so JetStream does not drop it as a duplicate of
//     the first send.
//   - The event-processor's refusal of an answer to an event that already has its committed
//     answer: nothing more (the event is answered).
//   - A DUPLICATE whose gate offers the accepted content it near-duplicates
//     (events.Rejection.Reusable): the request is answered with that content, a reused
//     outcome, and no model is asked again.
//   - Otherwise, for an LLM role: regenerate with the reason (attempt+1, new deterministic
//     proposal id) up to MaxReprompts times, then propose fallback content; a refused fallback
//     is abandoned (logged), since there is nothing safer to offer.
//
// Rejections of other roles' proposals are not ours (Result with a Note, nothing to publish).
// NoteNotMine is Rejected's note for a rejection of a role this worker does not run.
const NoteNotMine = "not one of this worker's roles"

// NoteReused is Rejected's note for a duplicate answered with the accepted content.
const NoteReused = "answered with the accepted content it near-duplicates"

// NoteShortCircuited is Handle's note for a request answered by the reuse short-circuit.
const NoteShortCircuited = "answered with the accepted content its target's recent requests kept reusing, without a model call"

func (a *Agent) Rejected(ctx context.Context, subject string, rej *events.Rejection, mine []roles.Role) (*Result, error) {
	p := rej.Proposal
	roleName := rej.AgentRole
	if p != nil {
		roleName = p.AgentRole
	}
	if roleName == events.EmitterNarrator && p != nil {
		if u := a.verifyRejection(ctx, subject, rej, events.EmitterNarrator, false); u != nil {
			return a.dropUnverified(ctx, rej, u), nil
		}
		// An outside narrator's proposal is neither regenerated nor retried here (a person
		// wrote it): its refusal is final, and the narrator reads it from the outcome (a
		// transient one says when to try again).
		a.logger(ctx).Info(telemetry.PromptAbandoned, "proposalId", rej.ProposalID, "correlationId", rej.CorrelationID,
			"gate", rej.Gate, "code", string(rej.Code), "reason", "a narrator's proposal refused: "+rej.Reason)
		return &Result{Note: "narrator proposal refused", Outcome: events.RefusedOutcome(p, rej, rej.Code, rej.Reason, a.cfg.Now())}, nil
	}
	i := slices.IndexFunc(mine, func(r roles.Role) bool { return r.Name == roleName })
	if i < 0 {
		return &Result{Note: NoteNotMine}, nil
	}
	role := mine[i]
	ctx = mcpx.WithCorrelationID(ctx, rej.CorrelationID)
	log := a.logger(ctx).With("correlationId", rej.CorrelationID, "proposalId", rej.ProposalID, telemetry.DimRole, role.Name,
		telemetry.DimPurpose, string(role.Purpose), "gate", rej.Gate, "code", string(rej.Code))
	if p == nil {
		log.Error(telemetry.PromptAbandoned, "reason", "the rejection does not carry the proposal, so it cannot be verified, retried or regenerated")
		return &Result{Note: "rejection without proposal"}, nil
	}
	if u := a.verifyRejection(ctx, subject, rej, role.Name, role.UsesLLM); u != nil {
		return a.dropUnverified(ctx, rej, u), nil
	}
	log.Info(telemetry.PromptRejected, append(invocation(rej), "reason", rej.Reason, "transient", rej.Transient,
		telemetry.DimRetryCount, rej.Attempt, telemetry.DimValidation, telemetry.OutcomeRejected)...)
	if rej.Transient {
		return a.retry(rej, role, log)
	}
	if rej.Gate == CommitGate && rej.Code == events.CodeCommitConflict && strings.Contains(rej.Reason, AlreadyAnswered) {
		// Another proposal answered the event first; a regenerated answer would be refused too.
		log.Info(telemetry.PromptAbandoned, "reason", "not answered again: "+rej.Reason)
		return &Result{Note: NoteAnswered}, nil
	}
	if reuse, ok := rej.Reusable(); ok && role.UsesLLM {
		// Reuse before regenerate: the answer near-duplicates content accepted for the same
		// target, and that content answers the request, without paying for reprompts whose
		// answers the scripted or real model would likely repeat.
		a.m.tasks.WithLabelValues(role.Name, "reused").Inc()
		a.cfg.ShortCircuit.Reused(payloadKey(role, p), reuse, a.cfg.Now())
		log.Info(telemetry.PromptReused, "reusedProposalId", reuse.ProposalID, "reusedEventId", reuse.EventID)
		return &Result{Note: NoteReused, Outcome: events.ReusedOutcome(p, reuse, a.cfg.Now())}, nil
	}
	// Refused for its content otherwise (a reprompt or fallback follows): the target's run of
	// reuses is broken.
	a.cfg.ShortCircuit.Other(payloadKey(role, p), a.cfg.Now())
	if !role.UsesLLM {
		log.Info(telemetry.PromptAbandoned, "reason", "deterministic proposals are not regenerated: "+rej.Reason)
		return &Result{Note: "deterministic proposal refused", Outcome: events.RefusedOutcome(p, rej, rej.Code, rej.Reason, a.cfg.Now())}, nil
	}
	if p.Provenance != nil && p.Provenance.Fallback != "" {
		a.m.tasks.WithLabelValues(role.Name, "abandoned").Inc()
		log.Error(telemetry.PromptAbandoned, "reason", "the fallback content was refused too: "+rej.Reason)
		return &Result{Note: "fallback refused", Outcome: events.RefusedOutcome(p, rej, rej.Code, rej.Reason, a.cfg.Now())}, nil
	}
	var env *events.Envelope
	raw, err := a.cfg.Cache.Get(ctx, taskKey(role.Name, p.CausationID))
	switch {
	case errors.Is(err, ErrMiss):
	case err != nil:
		return nil, fmt.Errorf("look up the trigger of %s: %w", p.ProposalID, err)
	default:
		if env, err = events.DecodeEnvelope(raw); err != nil {
			env = nil // unreadable: treated as expired
		}
	}
	next := p.Attempt + 1
	if env == nil {
		// The trigger outlived the cache: fall back, built from what the proposal carries.
		return a.fallbackFor(ctx, role, p, next, CauseTaskExpired,
			fmt.Sprintf("refused by the %s gate (%s: %s) and the trigger is no longer cached for a reprompt", rej.Gate, rej.Code, rej.Reason))
	}
	in, err := role.Input(env)
	if err != nil {
		return nil, err
	}
	if in.Rail, err = a.cachedRail(ctx, role.Name, p.CausationID); err != nil {
		return nil, err
	}
	if p.Attempt >= MaxReprompts {
		t := &task{role: role, env: env, in: in, attempt: next}
		return a.fallback(ctx, t, CauseRejected,
			fmt.Sprintf("refused after %d reprompts; last by the %s gate (%s): %s", MaxReprompts, rej.Gate, rej.Code, rej.Reason))
	}
	a.m.reprompts.WithLabelValues(string(role.Purpose)).Inc()
	log.Info(telemetry.PromptReprompted, telemetry.DimRetryCount, next, "reason", rej.Reason)
	return a.generate(ctx, Generation{Role: role, Trigger: env, Input: in, Attempt: next, Rejection: rej, Previous: p.Payload})
}

// invocation is the ai.* dimensions of the model invocation behind a refused proposal (zero when
// the rejection does not carry the proposal). The safety gate's refusal is the moderation flag.
func invocation(rej *events.Rejection) []any {
	var pv events.Provenance
	if rej.Proposal != nil && rej.Proposal.Provenance != nil {
		pv = *rej.Proposal.Provenance
	}
	return []any{telemetry.DimProvider, pv.Provider, telemetry.DimModel, pv.Model,
		telemetry.DimTokensPrompt, pv.Tokens.Prompt, telemetry.DimTokensCompletion, pv.Tokens.Completion,
		telemetry.DimLatencyMs, pv.LatencyMs, telemetry.DimToolCalls, len(pv.ToolCalls),
		telemetry.DimModerationFlagged, rej.Code == events.CodeSafetyFlagged}
}

// fallbackFor builds fallback content for a refused proposal without its trigger: the ids the
// trigger fixed are read back from the refused payload.
func (a *Agent) fallbackFor(ctx context.Context, role roles.Role, p *events.Proposal, attempt int, cause, reason string) (*Result, error) {
	var fields map[string]any
	if err := json.Unmarshal(p.Payload, &fields); err != nil {
		return nil, err
	}
	bind := map[string]string{}
	for _, k := range []string{"locationId", "npcId", "playerId", "questId"} {
		if s, ok := fields[k].(string); ok {
			bind[k] = s
		}
	}
	env := &events.Envelope{EventID: p.CausationID, CorrelationID: p.CorrelationID, Actor: p.Actor}
	if p.OriginUTC != nil {
		env.OccurredUTC = *p.OriginUTC
	}
	t := &task{role: role, env: env, in: roles.Input{Bind: bind}, attempt: attempt}
	return a.fallback(ctx, t, cause, reason)
}

func (a *Agent) retry(rej *events.Rejection, role roles.Role, log interface {
	Info(string, ...any)
	Error(string, ...any)
}) (*Result, error) {
	p := *rej.Proposal
	full, err := a.cfg.Routes.For(p.Kind)
	if err != nil {
		return nil, err
	}
	// Resume at the gate that refused it: the gates before it have passed it already.
	pending := full
	if i := slices.Index(full, rej.Gate); i >= 0 {
		pending = full[i:]
	}
	tries := 0
	for _, h := range p.Route.Trail {
		if h.Gate == rej.Gate && h.Outcome == events.OutcomeRejected {
			tries++
		}
	}
	if tries > MaxTransientRetries {
		a.m.tasks.WithLabelValues(role.Name, "abandoned").Inc()
		why := fmt.Sprintf("refused transiently %d times by the %s gate: %s", tries, rej.Gate, rej.Reason)
		log.Error(telemetry.PromptAbandoned, "reason", why)
		return &Result{Note: "too many transient refusals", Outcome: events.RefusedOutcome(&p, rej, events.CodeGaveUp, why, a.cfg.Now())}, nil
	}
	p.Route = events.Route{Pending: pending, Trail: p.Route.Trail}
	after := time.Duration(rej.RetryAfter * float64(time.Second))
	at := rej.RejectedUTC
	if at.IsZero() {
		at = a.cfg.Now()
	}
	a.m.retries.WithLabelValues(string(role.Purpose)).Inc()
	log.Info(telemetry.PromptRetried, "retryAfterSeconds", rej.RetryAfter, "to", pending[0])
	return &Result{Proposal: &p, Subject: events.RetrySubject(pending[0]),
		MsgID:     p.ProposalID + ":retry:" + rej.Gate + ":" + strconv.FormatInt(at.UnixNano(), 36),
		NotBefore: at.Add(after)}, nil
}
