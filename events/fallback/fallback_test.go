package fallback_test

import (
	"testing"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/fallback"
)

// Every entry of the table must pass its kind's schema, or a fallback would be refused too.
func TestEveryEntryIsAValidPayload(t *testing.T) {
	tb := fallback.Default()
	locs := []string{"loc:a", "loc:b", "loc:c", "loc:d", "loc:e", "loc:f", "loc:g", "loc:h"}
	for _, l := range locs {
		for _, c := range []struct {
			kind string
			bind map[string]string
		}{
			{events.KindAmbience, map[string]string{"locationId": l}},
			{events.KindNPCDialogue, map[string]string{"npcId": "npc:x", "playerId": "player:" + l[4:], "locationId": l}},
			{events.KindQuestSeed, map[string]string{"questId": "quest:q1", "locationId": l}},
		} {
			p, err := tb.Payload(c.kind, c.bind)
			if err != nil {
				t.Fatal(err)
			}
			if err := events.ValidatePayload(c.kind, p); err != nil {
				t.Errorf("%s fallback for %s: %v", c.kind, l, err)
			}
		}
	}
	if _, err := tb.Payload(events.KindAmbience, nil); err == nil {
		t.Error("ambience without a location id accepted")
	}
	if _, err := tb.Payload(events.KindExitRemoved, map[string]string{}); err == nil {
		t.Error("a kind without fallback content accepted")
	}
	if ref := tb.Ref(); len(ref.SHA256) != 64 || ref.Version != "1.0.0" {
		t.Errorf("ref %+v", ref)
	}
}
