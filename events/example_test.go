package events_test

import (
	"encoding/json"
	"fmt"

	"github.com/worldgate/worldgate/events"
)

// A proposal kind is defined once (events.KindInfo): its payload type says what the gates
// read of it: the text people read (safety, dedup), what it is about, the entities it needs.
func ExampleDecodePayload() {
	raw := json.RawMessage(`{"npcId":"npc:brannoc","playerId":"player:ada","locationId":"loc:tavern","line":"The mill burned last night.","intent":"inform"}`)
	p, err := events.DecodePayload(events.KindNPCDialogue, raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Content())
	fmt.Println(p.Target(), p.References())
	_, err = events.DecodePayload(events.KindNPCDialogue, json.RawMessage(`{"npcId":"npc:brannoc","tone":"gruff"}`))
	fmt.Println(err)
	// Output:
	// The mill burned last night.
	// npc:brannoc|player:ada [npc:brannoc player:ada loc:tavern]
	// npc_dialogue payload: json: unknown field "tone"
}
