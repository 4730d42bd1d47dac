package aiworker_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// Reuse before regenerate (issue 41 item 1): a line refused as a near-duplicate of a line the
// dedup gate accepted for the same NPC–player pair, with that line offered, ends the request
// with one reused outcome carrying the accepted line; no reprompt, no further model call, no
// fallback. An offer about another target (another player) is not taken: that refusal is
// reprompted as before.
func TestDuplicateIsAnsweredWithTheAcceptedContent(t *testing.T) {
	s := startStack(t, stackOpts{})
	env := s.publish(events.PlayerSpokeToNPC, spoke)
	p0 := s.waitProposals(schemaSubject, 1)[0].p
	accepted := "0190a8f0-0000-7000-8000-0000000000c1"
	line := json.RawMessage(`{"npcId":"npc:mira","playerId":"player:ada","locationId":"loc:square","line":"Two coppers, as ever.","intent":"inform"}`)
	at := time.Now().Add(-time.Minute)
	rej := &events.Rejection{ProposalID: p0.ProposalID, Kind: p0.Kind, Gate: gates.Dedup, Code: events.CodeDuplicate,
		Reason:  "This npc_dialogue is a near-duplicate of proposal " + accepted + ": that content answers the request.",
		Details: events.DuplicateDetails(accepted, at, line, 6, 14), CorrelationID: p0.CorrelationID, AgentRole: p0.AgentRole,
		Attempt: p0.Attempt, RejectedUTC: time.Now().UTC(), Proposal: s.refusedAt(p0, gates.Dedup)}
	s.publishRejection(events.RejectedSubject(gates.Dedup), rej, p0.ProposalID+":rejected:"+gates.Dedup)

	var got []*events.Outcome
	natstest.WaitFor(t, 10*time.Second, "the reused outcome", func() bool {
		got = s.outcomesOf(env.EventID)
		return len(got) > 0
	})
	natstest_WaitSettledOn(t, s, events.StreamProposals, "ai-rejections")
	if got = s.outcomesOf(env.EventID); len(got) != 1 {
		t.Fatalf("%d outcomes, want 1", len(got))
	}
	o := got[0]
	if o.Kind != events.OutcomeReused || o.Reuse == nil || o.Reuse.ProposalID != accepted || o.Reuse.EventID != events.DomainEventID(accepted, 0) ||
		o.Text() != "Two coppers, as ever." || o.ProposalID != p0.ProposalID || o.Journey == nil {
		t.Fatalf("outcome %+v (reuse %+v), want reused with the accepted line", o, o.Reuse)
	}
	if n := len(s.proposals(schemaSubject)); n != 1 {
		t.Fatalf("%d proposals, want only the first (no reprompt, no fallback)", n)
	}
	if n := metricstest.Sum(s.t, s.reg, "worldgate_ai_reprompts_total", nil); n != 0 {
		t.Fatalf("reprompts = %v, want 0", n)
	}
	if n := metricstest.Sum(s.t, s.reg, "worldgate_ai_tasks_total", map[string]string{"outcome": "reused"}); n != 1 {
		t.Fatalf("reused tasks = %v, want 1", n)
	}

	// An offer about another player's exchange is not this request's answer: reprompted.
	other := s.publish(events.PlayerSpokeToNPC, spoke)
	q0 := s.waitProposals(schemaSubject, 2)[1].p
	if q0.CausationID != other.EventID {
		t.Fatalf("second proposal answers %s", q0.CausationID)
	}
	bobs := json.RawMessage(`{"npcId":"npc:mira","playerId":"player:bob","locationId":"loc:square","line":"Two coppers, as ever.","intent":"inform"}`)
	rej2 := *rej
	rej2.ProposalID, rej2.CorrelationID, rej2.Attempt = q0.ProposalID, q0.CorrelationID, q0.Attempt
	rej2.Details = events.DuplicateDetails(accepted, at, bobs, 6, 14)
	rej2.Proposal = s.refusedAt(q0, gates.Dedup)
	s.publishRejection(events.RejectedSubject(gates.Dedup), &rej2, q0.ProposalID+":rejected:"+gates.Dedup)
	q1 := s.waitProposals(schemaSubject, 3)[2].p
	if q1.Attempt != 1 || q1.CausationID != other.EventID {
		t.Fatalf("after an offer about another target: attempt %d for %s, want a reprompt", q1.Attempt, q1.CausationID)
	}
}
