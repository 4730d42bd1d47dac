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
