package worldtools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/natsx"
)

// get-recent-dialogue over Streamable HTTP with the official client: what the memory-writer
// recorded from committed events comes back newest first, with the NPC's recent events; an
// unknown id or a limit out of range is a typed tool error the model can read.
func TestGetRecentDialogue(t *testing.T) {
	e := setup(t, mcpx.RateLimit{})
	ctx := context.Background()
	if err := natsx.Provision(ctx, e.js, natsx.DefaultTopology(natsx.TopologyOptions{}), logx.Discard()); err != nil {
		t.Fatal(err)
	}
	cs, err := connect(t, e.url, token)
	if err != nil {
		t.Fatal(err)
	}
	var out worldtools.RecentDialogueOutput
	if text, isErr := call(t, cs, "get-recent-dialogue", map[string]any{"npcId": "npc:mira", "playerId": "player:ada"}, &out); isErr {
		t.Fatalf("before any dialogue: %s", text)
	}
	if len(out.Exchanges) != 0 || out.NPCID != "npc:mira" {
		t.Fatalf("before any dialogue: %+v", out)
	}

	store, err := memory.Open(ctx, e.js, memory.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for i, x := range []struct{ said, line string }{
		{"Where can I buy a lantern?", "Try the smith, east of here."},
		{"My address is [redacted address]. Send it there.", "I send nothing anywhere, friend."},
		{"Any news?", "The bridge is out."},
	} {
		payload, _ := json.Marshal(events.NPCDialoguePayload{NPCID: "npc:mira", PlayerID: "player:ada", LocationID: "loc:square", Line: x.line, Intent: "inform", PlayerSaid: x.said})
		evt := events.DomainEvent{EventID: fmt.Sprintf("evt-%d", i), Type: "NPCDialogueAccepted", ProposalID: fmt.Sprintf("p-%d", i), Kind: events.KindNPCDialogue,
			CommittedUTC: at.Add(time.Duration(i) * time.Minute), Payload: payload}
		if _, err := store.Record(ctx, evt); err != nil {
			t.Fatal(err)
		}
	}
	call(t, cs, "get-recent-dialogue", map[string]any{"npcId": "npc:mira", "playerId": "player:ada", "limit": 2}, &out)
	if len(out.Exchanges) != 2 || out.Exchanges[0].PlayerSaid != "Any news?" || out.Exchanges[1].NPCLine != "I send nothing anywhere, friend." {
		t.Fatalf("the last two exchanges: %+v", out.Exchanges)
	}
	if len(out.AroundNPC) != 3 || !strings.Contains(out.AroundNPC[0].Text, "The bridge is out.") {
		t.Fatalf("around the NPC: %+v", out.AroundNPC)
	}

	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"npcId": "npc:nobody", "playerId": "player:ada"}, `not found: no NPC with id "npc:nobody"`},
		{map[string]any{"npcId": "npc:mira", "playerId": "player:nobody"}, `not found: no player with id "player:nobody"`},
		{map[string]any{"npcId": "player:ada", "playerId": "player:ada"}, `invalid input: npcId "player:ada" should start with "npc:"`},
		{map[string]any{"npcId": "npc:mira", "playerId": "player:ada", "limit": 21}, "maximum"},
		{map[string]any{"npcId": "npc:mira", "playerId": "player:ada", "limit": 0}, "minimum"},
		{map[string]any{"npcId": "npc:mira", "playerId": "player:ada", "limit": 2.5}, "integer"},
		{map[string]any{"npcId": "npc:mira"}, "playerId"},
	} {
		text, isErr := call(t, cs, "get-recent-dialogue", c.args, nil)
		if !isErr || !strings.Contains(text, c.want) {
			t.Errorf("%v: isError=%v text=%q, want it to contain %q", c.args, isErr, text, c.want)
		}
	}
}
