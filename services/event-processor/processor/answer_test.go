package processor_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/event-processor/apply"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// One triggering world event yields at most one committed answer of its kind. Two proposals for
// the same (event, agent role) that both passed every gate, as when a forged rejection made the
// ai-worker regenerate an answer that had already committed, commit once: the second is refused
// at commit saying why. An answer refused at commit blocks nothing: the attempt that replaces it
// commits, and another event's answer commits beside it.
func TestOneTriggeringEventCommitsOneAnswer(t *testing.T) {
	e, gd, _ := startProcessor(t)
	ro := reader(t, gd.URL())

	var decided uint64
	send := func(p *events.Proposal) {
		t.Helper()
		publish(t, e.JS, p, p.ProposalID)
		decided++
		natstest.WaitFor(t, 15*time.Second, "proposal "+p.ProposalID+" decided", func() bool {
			return committed(t, e)+rejected(t, e) == decided && settled(t, e)
		})
	}
	for _, p := range []*events.Proposal{
		proposal(events.KindLocationCreated, "w1", obj{"locationId": "loc:gate", "name": "Gate", "description": "A gate."}),
		proposal(events.KindNPCCreated, "w2", obj{"npcId": "npc:mara", "name": "Mara", "persona": "gruff", "locationId": "loc:gate"}),
		proposal(events.KindPlayerCreated, "w3", obj{"playerId": "player:ana", "name": "Ana", "locationId": "loc:gate"}),
	} {
		send(p)
	}
	// answer is an agent's proposal answering the world event cause, at attempt n.
	answer := func(kind, id, cause string, attempt int, payload obj) *events.Proposal {
		p := proposal(kind, id, payload)
		p.CausationID, p.CorrelationID, p.Attempt = cause, "corr-"+cause, attempt
		return p
	}
	amb := obj{"locationId": "loc:gate", "text": "Ash falls.", "mood": "grim"}
	line := obj{"npcId": "npc:mara", "playerId": "player:ana", "locationId": "loc:gate", "line": "Halt.", "intent": "greet"}
	quest := func(involves string) obj {
		return obj{"questId": "quest:ember", "locationId": "loc:gate", "title": "Ember", "hook": "A glow below.",
			"objectives": []string{"descend"}, "involves": []string{involves}}
	}
	type want struct {
		p       *events.Proposal
		commits bool
		reason  string // of the refusal
	}
	steps := []want{
		{answer(events.KindAmbience, "amb-0", "evt-moved-1", 0, amb), true, ""},
		// Regenerated after a rejection of an answer that had in fact committed.
		{answer(events.KindAmbience, "amb-1", "evt-moved-1", 1, obj{"locationId": "loc:gate", "text": "Ash falls again.", "mood": "grim"}), false, apply.AlreadyAnswered},
		{answer(events.KindAmbience, "amb-other", "evt-moved-2", 0, amb), true, ""},
		{answer(events.KindNPCDialogue, "dlg-0", "evt-spoke-1", 0, line), true, ""},
		{answer(events.KindNPCDialogue, "dlg-fallback", "evt-spoke-1", 3, line), false, apply.AlreadyAnswered},
		// Refused at commit for what it says: the reprompt that replaces it still commits,
		// and the fallback after that does not.
		{answer(events.KindQuestSeed, "quest-0", "evt-quest-1", 0, quest("npc:ghost")), false, "npc:ghost does not exist"},
		{answer(events.KindQuestSeed, "quest-1", "evt-quest-1", 1, quest("npc:mara")), true, ""},
		{answer(events.KindQuestSeed, "quest-fallback", "evt-quest-1", 3, quest("npc:mara")), false, apply.AlreadyAnswered},
	}
	for _, s := range steps {
		send(s.p)
	}

	refusals := map[string]events.Rejection{}
	for _, raw := range readAll(t, e, events.RejectedSubject(processor.Gate)) {
		var r events.Rejection
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		refusals[r.ProposalID] = r
	}
	for _, s := range steps {
		r, refused := refusals[s.p.ProposalID]
		switch {
		case s.commits && refused:
			t.Errorf("%s was refused (%s), want it committed", s.p.ProposalID, r.Reason)
		case !s.commits && !refused:
			t.Errorf("%s was committed, want it refused with %q", s.p.ProposalID, s.reason)
		case !s.commits && (r.Code != events.CodeCommitConflict || !strings.Contains(r.Reason, s.reason)):
			t.Errorf("%s refused with %s %q, want %s with %q", s.p.ProposalID, r.Code, r.Reason, events.CodeCommitConflict, s.reason)
		}
	}
	if r := refusals["amb-1"]; !strings.Contains(r.Reason, "evt-moved-1") || !strings.Contains(r.Reason, "amb-1") {
		t.Errorf("the refusal of the second answer does not name the event and the proposal: %q", r.Reason)
	}

	v, _ := counts(t, ro)
	for label, n := range map[string]int64{"Ambience": 2, "Dialogue": 1, "QuestSeed": 1} {
		if v[label] != n {
			t.Errorf("%d %s vertices, want %d", v[label], label, n)
		}
	}
	for id, proposalID := range map[string]string{
		apply.AnswerID("amb:", steps[0].p): "amb-0", apply.AnswerID("amb:", steps[2].p): "amb-other",
		apply.AnswerID("dlg:", steps[3].p): "dlg-0", "quest:ember": "quest-1",
	} {
		got := values(t, ro, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
			return g.V(id).Values("proposalId")
		})
		if fmt.Sprint(got) != fmt.Sprint([]any{proposalID}) {
			t.Errorf("%s was committed by %v, want %s", id, got, proposalID)
		}
	}
}
