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

// The reuse short-circuit through the ai-worker (issue 41): two quest requests at the tavern
// whose answers the dedup gate refuses as near-duplicates of an accepted quest, offering it,
// each end in reuse after a model call; the third request for the tavern is answered with
// that quest at once — a reused outcome with no proposal, no model call and no tool call. A
// request for another location still asks the model.
func TestRepeatedReuseShortCircuitsTheModel(t *testing.T) {
	s := startStack(t, stackOpts{})
	accepted := "0190a8f0-0000-7000-8000-0000000000d7"
	quest := json.RawMessage(`{"questId":"quest:cask","locationId":"loc:tavern","title":"The Missing Cask","hook":"A cask of the Goose's best ale vanished overnight.","objectives":["Ask the cellar boy","Follow the wet tracks"]}`)
	at := time.Now().Add(-time.Minute)
	reuse := func(n int, theme string) *events.Envelope {
		t.Helper()
		env := s.publish(events.QuestSeedRequested, events.QuestSeedRequestedPayload{LocationID: "loc:tavern", PlayerID: "player:ada", Theme: theme})
		p := s.waitProposals(schemaSubject, n)[n-1].p
		if p.CausationID != env.EventID {
			t.Fatalf("proposal %d answers %s, not %s", n, p.CausationID, env.EventID)
		}
		rej := &events.Rejection{ProposalID: p.ProposalID, Kind: p.Kind, Gate: gates.Dedup, Code: events.CodeDuplicate,
			Reason:  "This quest_seed is a near-duplicate of proposal " + accepted + ": that content answers the request.",
			Details: events.DuplicateDetails(accepted, at, quest, 5, 14), CorrelationID: p.CorrelationID, AgentRole: p.AgentRole,
			Attempt: p.Attempt, RejectedUTC: time.Now().UTC(), Proposal: s.refusedAt(p, gates.Dedup)}
		s.publishRejection(events.RejectedSubject(gates.Dedup), rej, p.ProposalID+":rejected:"+gates.Dedup)
		natstest.WaitFor(t, 10*time.Second, "the reused outcome", func() bool {
			got := s.outcomesOf(env.EventID)
			return len(got) == 1 && got[0].Kind == events.OutcomeReused
		})
		return env
	}
	reuse(1, "a stolen cask")
	reuse(2, "a barrel gone missing")
	natstest_WaitSettledOn(t, s, events.StreamProposals, "ai-rejections")

	calls := metricstest.Sum(s.t, s.reg, "worldgate_ai_requests_total", nil)
	tools := s.toolCalls.Load()
	if calls == 0 {
		t.Fatal("no model call counted: the count below would prove nothing")
	}
	third := s.publish(events.QuestSeedRequested, events.QuestSeedRequestedPayload{LocationID: "loc:tavern", PlayerID: "player:ada", Theme: "the brewer's lost keg"})
	var got []*events.Outcome
	natstest.WaitFor(t, 10*time.Second, "the third request's outcome", func() bool {
		got = s.outcomesOf(third.EventID)
		return len(got) > 0
	})
	o := got[0]
	if len(got) != 1 || o.Kind != events.OutcomeReused || o.Reuse == nil || o.Reuse.ProposalID != accepted || o.ProposalID != "" ||
		o.ProposalKind != events.KindQuestSeed || o.LocationID != "loc:tavern" || o.Journey != nil {
		t.Fatalf("outcomes %+v, want one reused outcome answered with %s and no proposal", got, accepted)
	}
	var pl events.QuestSeedPayload
	if err := json.Unmarshal(o.Reuse.Payload, &pl); err != nil || pl.QuestID != "quest:cask" {
		t.Fatalf("reused content %s (%v), want the accepted quest", o.Reuse.Payload, err)
	}
	if n := len(s.proposals(schemaSubject)); n != 2 {
		t.Fatalf("%d proposals, want 2: the third request proposes nothing", n)
	}
	if n := metricstest.Sum(s.t, s.reg, "worldgate_ai_requests_total", nil); n != calls {
		t.Fatalf("model calls %v after the third request, want %v (none)", n, calls)
	}
	if n := s.toolCalls.Load(); n != tools {
		t.Fatalf("tool calls %d after the third request, want %d (none)", n, tools)
	}
	if n := metricstest.Sum(s.t, s.reg, "worldgate_ai_tasks_total", map[string]string{"outcome": "reused"}); n != 3 {
		t.Fatalf("reused tasks = %v, want 3", n)
	}

	// Another location's requests are another target: the model is asked.
	s.publish(events.QuestSeedRequested, events.QuestSeedRequestedPayload{LocationID: "loc:square", PlayerID: "player:ada", Theme: "a stolen cask"})
	s.waitProposals(schemaSubject, 3)
	if n := metricstest.Sum(s.t, s.reg, "worldgate_ai_requests_total", nil); n <= calls {
		t.Fatalf("model calls %v, want more than %v for another location", n, calls)
	}
}
