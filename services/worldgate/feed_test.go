package main

import (
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
)

// The terminal feed prints a skipped outcome (it carries no event) with its reason.
func TestFeedLineOfASkippedOutcome(t *testing.T) {
	env := envelope(t, events.PlayerMoved, "player:ana", events.PlayerMovedPayload{
		PlayerID: "player:ana", FromLocationID: "loc:ash-gate", ToLocationID: "loc:tavern", Direction: "east"})
	o := events.SkippedOutcome(env, "ambience", "loc:tavern", events.CodeAmbienceFresh, "loc:tavern has fresh ambience", time.Minute, time.Now())
	if line := feedLine(o); !strings.Contains(line, "ambience skipped (AMBIENCE_FRESH): loc:tavern has fresh ambience") {
		t.Fatalf("feed line %q", line)
	}
}

// A reused outcome (issue 41) prints the content it was answered with.
func TestFeedLineOfAReusedOutcome(t *testing.T) {
	p := &events.Proposal{ProposalID: "0190a8f0-0000-7000-8000-0000000000a2", Kind: events.KindQuestSeed, CausationID: "e-1", CorrelationID: "c-1",
		AgentRole: "quest-planner", Actor: events.Actor{Kind: "player", ID: "player:ana"}, Payload: []byte(`{"locationId":"loc:tavern"}`)}
	o := events.ReusedOutcome(p, events.Reuse{ProposalID: "p-first", EventID: events.DomainEventID("p-first", 0), AcceptedUTC: time.Now(),
		Payload: []byte(`{"questId":"quest:bell","locationId":"loc:tavern","title":"The Lost Bell","hook":"Find it.","objectives":["look"]}`)}, time.Now())
	if line := feedLine(o); !strings.Contains(line, "quest_seed answered with accepted content (p-first): The Lost Bell: Find it.") {
		t.Fatalf("feed line %q", line)
	}
}
