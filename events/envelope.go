package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// SpecVersion is the only WorldEventEnvelope version this module reads and writes.
const SpecVersion = "1.0"

// DefaultMaxBytes is the size limit of one encoded message unless a Decoder says otherwise.
const DefaultMaxBytes = 64 << 10

// Actor says who caused an event or proposal.
type Actor struct {
	Kind string `json:"kind"` // player | npc | system | agent | operator
	ID   string `json:"id"`
}

// Envelope is the WorldEventEnvelope v1: one fact that happened in the game world.
// It is published to Subject(Type) with the Nats-Msg-Id header set to IdempotencyKey, so that
// JetStream drops a republished copy inside the stream's duplicate window.
type Envelope struct {
	SpecVersion    string          `json:"specVersion"`
	EventID        string          `json:"eventId" validate:"uuidv7"`
	Type           string          `json:"type"`
	OccurredUTC    time.Time       `json:"occurredUtc"`
	Source         string          `json:"source"`
	Actor          Actor           `json:"actor"`
	CorrelationID  string          `json:"correlationId"`
	CausationID    string          `json:"causationId,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey"`
	Payload        json.RawMessage `json:"payload"`
}

// NewEnvelope builds a valid envelope for an event of eventType with a fresh UUIDv7, the current
// time, and the event id as correlation id and idempotency key. Override fields as needed (a
// retrying publisher must reuse its idempotency key). payload is marshalled to JSON.
func NewEnvelope(eventType, source string, actor Actor, payload any) (*Envelope, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", eventType, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new event id: %w", err)
	}
	return &Envelope{
		SpecVersion:    SpecVersion,
		EventID:        id.String(),
		Type:           eventType,
		OccurredUTC:    time.Now().UTC(),
		Source:         source,
		Actor:          actor,
		CorrelationID:  id.String(),
		IdempotencyKey: id.String(),
		Payload:        raw,
	}, nil
}

// World event types that have a payload schema. A type outside this list is rejected with
// CodeUnknownType.
const (
	PlayerMoved         = "Player.Moved"
	PlayerMoveRequested = "Player.MoveRequested"
	PlayerSpokeToNPC    = "Player.SpokeToNPC"
	QuestSeedRequested  = "Quest.SeedRequested"
)

// EventTypes lists every world event type this version of the contract knows.
func EventTypes() []string {
	return []string{PlayerMoved, PlayerMoveRequested, PlayerSpokeToNPC, QuestSeedRequested}
}

// PlayerMovedPayload is the payload of Player.Moved: the game moved a player.
type PlayerMovedPayload struct {
	PlayerID       string `json:"playerId"`
	FromLocationID string `json:"fromLocationId"`
	ToLocationID   string `json:"toLocationId" validate:"nefield=FromLocationID"`
	Direction      string `json:"direction,omitempty"`
}

// PlayerMoveRequestedPayload is the payload of Player.MoveRequested: a player asks to move; the
// world-rules agent checks it against the exits.
type PlayerMoveRequestedPayload struct {
	PlayerID       string `json:"playerId"`
	FromLocationID string `json:"fromLocationId"`
	Direction      string `json:"direction"`
}

// PlayerSpokeToNPCPayload is the payload of Player.SpokeToNPC. Utterance is untrusted player text.
type PlayerSpokeToNPCPayload struct {
	PlayerID   string `json:"playerId"`
	NPCID      string `json:"npcId"`
	LocationID string `json:"locationId"`
	Utterance  string `json:"utterance"`
}

// QuestSeedRequestedPayload is the payload of Quest.SeedRequested.
type QuestSeedRequestedPayload struct {
	LocationID string `json:"locationId"`
	PlayerID   string `json:"playerId,omitempty"`
	FactionID  string `json:"factionId,omitempty"`
	Theme      string `json:"theme,omitempty"`
}

// payloadTypes maps each event type to the Go type its payload decodes into, so the decoder can
// apply the struct rules that JSON Schema cannot express.
var payloadTypes = map[string]func() any{
	PlayerMoved:         func() any { return new(PlayerMovedPayload) },
	PlayerMoveRequested: func() any { return new(PlayerMoveRequestedPayload) },
	PlayerSpokeToNPC:    func() any { return new(PlayerSpokeToNPCPayload) },
	QuestSeedRequested:  func() any { return new(QuestSeedRequestedPayload) },
}

// namesPlayer is a payload that names the player it is about.
type namesPlayer interface{ player() string }

func (p *PlayerMovedPayload) player() string         { return p.PlayerID }
func (p *PlayerMoveRequestedPayload) player() string { return p.PlayerID }
func (p *PlayerSpokeToNPCPayload) player() string    { return p.PlayerID }
func (p *QuestSeedRequestedPayload) player() string  { return p.PlayerID }

// PlayerOf returns the player an envelope's payload names ("" when it names none, or cannot be
// read): the key of a player's budgets and limits, whatever actor id the envelope claims.
func PlayerOf(env *Envelope) string {
	mk, ok := payloadTypes[env.Type]
	if !ok {
		return ""
	}
	v := mk()
	if json.Unmarshal(env.Payload, v) != nil {
		return ""
	}
	if np, ok := v.(namesPlayer); ok {
		return np.player()
	}
	return ""
}

// ActorKey is the actor ("kind:id") of an encoded envelope or proposal, both of which carry
// it as a top-level "actor"; "" when data has none. It is the order key of the consumers that
// keep one actor's messages in stream order (runtime.Consumer.OrderKey): the event-processor,
// the gates and the world-rules worker. It reads up to the actor only (it comes before the
// payload, the trail and the attestations), not the whole message.
func ActorKey(_ string, data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		if t == "actor" {
			var a Actor
			if dec.Decode(&a) != nil || a.ID == "" {
				return ""
			}
			return a.Kind + ":" + a.ID
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}
