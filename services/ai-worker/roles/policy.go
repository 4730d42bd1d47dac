package roles

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/shared/llm/prompt"
)

// Input is what a role takes from its trigger.
type Input struct {
	// Facts are trusted identifiers, rendered into the prompt as key: value lines.
	Facts []templates.Fact
	// Untrusted is player text, rendered as data blocks.
	Untrusted []prompt.Untrusted
	// Bind are the payload fields the trigger fixes: whatever the model answers, these values
	// are written over its answer, so it cannot attach content to another entity.
	Bind map[string]string
	// LocationID is the location the content is about.
	LocationID string
	// Move is the request the world-rules role resolves.
	Move *events.PlayerMoveRequestedPayload
	// Rail is what the agent's input rail did with Untrusted (nil before it ran).
	Rail *events.InputRail
}

// Input decodes the trigger's payload for the role. The envelope must have been decoded with
// events.DecodeEnvelope (so the payload matches its schema); an event of another type than
// the role's trigger is an error.
func (r Role) Input(env *events.Envelope) (Input, error) {
	if env.Type != r.Trigger {
		return Input{}, fmt.Errorf("role %s handles %s, not %s", r.Name, r.Trigger, env.Type)
	}
	switch r.Trigger {
	case events.PlayerMoved:
		var p events.PlayerMovedPayload
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			return Input{}, err
		}
		// Only the location: ambience describes the place, whoever arrives from wherever, so
		// every arrival shares one context (and one cache entry while the place is unchanged).
		return Input{LocationID: p.ToLocationID, Bind: map[string]string{"locationId": p.ToLocationID},
			Facts: []templates.Fact{{Key: "locationId", Value: p.ToLocationID}}}, nil
	case events.PlayerSpokeToNPC:
		var p events.PlayerSpokeToNPCPayload
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			return Input{}, err
		}
		return Input{
			LocationID: p.LocationID,
			Facts: []templates.Fact{{Key: "npcId", Value: p.NPCID}, {Key: "playerId", Value: p.PlayerID},
				{Key: "locationId", Value: p.LocationID}},
			Untrusted: []prompt.Untrusted{prompt.Data(LabelPlayerSaid, p.Utterance)},
			// playerSaid is bound from the trigger (the input rail replaces it with its redacted
			// form, or drops it when it blocks the words): the committed line carries what it
			// answers, which the interaction memory keeps.
			Bind: map[string]string{"npcId": p.NPCID, "playerId": p.PlayerID, "locationId": p.LocationID, BindPlayerSaid: p.Utterance},
		}, nil
	case events.QuestSeedRequested:
		var p events.QuestSeedRequestedPayload
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			return Input{}, err
		}
		// The quest's real id is bound after generation (derived from the event); the prompt
		// carries a constant draft id, so equal requests share a cache entry.
		in := Input{LocationID: p.LocationID,
			Facts: []templates.Fact{{Key: "questId", Value: DraftQuestID}, {Key: "locationId", Value: p.LocationID}},
			Bind:  map[string]string{"locationId": p.LocationID, "questId": QuestID(env.EventID)},
		}
		if p.PlayerID != "" {
			in.Facts = append(in.Facts, templates.Fact{Key: "playerId", Value: p.PlayerID})
		}
		if p.FactionID != "" {
			in.Facts = append(in.Facts, templates.Fact{Key: "factionId", Value: p.FactionID})
		}
		if p.Theme != "" {
			in.Untrusted = append(in.Untrusted, prompt.Data("requested_theme", p.Theme))
		}
		return in, nil
	case events.PlayerMoveRequested:
		var p events.PlayerMoveRequestedPayload
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			return Input{}, err
		}
		return Input{LocationID: p.FromLocationID, Move: &p,
			Bind: map[string]string{"playerId": p.PlayerID, "fromLocationId": p.FromLocationID}}, nil
	}
	return Input{}, fmt.Errorf("role %s: no input policy for %s", r.Name, r.Trigger)
}

// LabelPlayerSaid labels the player's words in the prompt; BindPlayerSaid is the npc_dialogue
// payload field they are bound to (as the input rail leaves them).
const (
	LabelPlayerSaid = "player_said"
	BindPlayerSaid  = "playerSaid"
)

// DraftQuestID is the quest id the prompt shows the model.
const DraftQuestID = "quest:draft"

// QuestID is the id of the quest a Quest.SeedRequested event asks for: derived from the event,
// so a redelivered request proposes the same quest.
func QuestID(eventID string) string {
	s := sha256.Sum256([]byte(eventID))
	return "quest:" + hex.EncodeToString(s[:10])
}

// Bind writes the trigger's fixed fields over a model's answer (a JSON object) and returns it.
func Bind(answer []byte, bind map[string]string) (json.RawMessage, error) {
	var obj map[string]any
	if err := json.Unmarshal(answer, &obj); err != nil {
		return nil, fmt.Errorf("the answer is not a JSON object: %w", err)
	}
	if obj == nil {
		return nil, fmt.Errorf("the answer is not a JSON object")
	}
	for k, v := range bind {
		obj[k] = v
	}
	return json.Marshal(obj)
}

// Directions are the exit directions the contract knows.
var Directions = []string{"north", "south", "east", "west", "up", "down", "northeast", "northwest", "southeast", "southwest", "in", "out"}

// IsDirection reports whether d is a direction the contract knows.
func IsDirection(d string) bool { return slices.Contains(Directions, d) }
