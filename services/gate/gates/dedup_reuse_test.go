package gates_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// A near-duplicate quest seed for a location is refused with the accepted seed itself
// (issue 41 item 1): the rejection's Reusable is that proposal's content, its domain event and
// when it was accepted, so the request can be answered with the quest that exists instead of
// paying for regenerations. A seed for another location is no duplicate (the scope is the
// location).
func TestDedupOffersTheAcceptedContentForReuse(t *testing.T) {
	s := newStack(t)
	s.run(t, s.deps(testConfig()), "dedup")
	seed := func(loc, title string) *events.Proposal {
		return startAt(proposal(t, events.KindQuestSeed, map[string]any{"questId": "quest:bell-" + nextID("q"), "locationId": loc,
			"title": title, "hook": "The bell of the square went missing in the night, and the watch blames the river folk.",
			"objectives": []string{"ask the watch", "search the river bank"}}), "dedup")
	}
	first := seed("loc:square", "The Missing Bell")
	s.publish(t, first)
	natstest.WaitFor(t, 10*time.Second, "first accepted", func() bool { return s.count(t, events.StreamProposals, "proposals.gate.replay") == 1 })
	elsewhere := seed("loc:gate", "The Missing Bell")
	s.publish(t, elsewhere)
	natstest.WaitFor(t, 10*time.Second, "the other location's accepted", func() bool { return s.count(t, events.StreamProposals, "proposals.gate.replay") == 2 })
	again := seed("loc:square", "The Missing Bell Again")
	s.publish(t, again)
	r := s.waitRejected(t, again.ProposalID)
	reuse, ok := r.Reusable()
	if r.Code != events.CodeDuplicate || !ok {
		t.Fatalf("the near-duplicate seed: %+v (reusable %v)", r, ok)
	}
	var got, want map[string]any
	_ = json.Unmarshal(reuse.Payload, &got)
	_ = json.Unmarshal(first.Payload, &want)
	if reuse.ProposalID != first.ProposalID || reuse.EventID != events.DomainEventID(first.ProposalID, 0) || got["title"] != want["title"] ||
		got["questId"] != want["questId"] || reuse.AcceptedUTC.IsZero() {
		t.Fatalf("reuse offered %+v (payload %v), want proposal %s's content %v", reuse, got, first.ProposalID, want)
	}
}
