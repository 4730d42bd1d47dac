package gates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/worldgate/worldgate/events"
)

// Go shapes of the proposal payloads (the JSON Schemas in schemas/v1/proposals are the
// contract; these carry the struct rules JSON Schema cannot express, and give the gates typed
// access). validate tags are validator/v10 rules; notblank is ours.

type ambiencePayload struct {
	LocationID string `json:"locationId"`
	Text       string `json:"text" validate:"notblank"`
	Mood       string `json:"mood"`
}

type npcDialoguePayload struct {
	NPCID      string `json:"npcId"`
	PlayerID   string `json:"playerId"`
	LocationID string `json:"locationId"`
	Line       string `json:"line" validate:"notblank"`
	Intent     string `json:"intent"`
}

type questSeedPayload struct {
	QuestID    string   `json:"questId"`
	LocationID string   `json:"locationId"`
	Title      string   `json:"title" validate:"notblank"`
	Hook       string   `json:"hook" validate:"notblank"`
	Objectives []string `json:"objectives" validate:"unique,dive,notblank"`
	Involves   []string `json:"involves,omitempty" validate:"unique"`
}

type playerMovedPayload struct {
	PlayerID       string `json:"playerId"`
	FromLocationID string `json:"fromLocationId"`
	ToLocationID   string `json:"toLocationId" validate:"nefield=FromLocationID"`
	Direction      string `json:"direction"`
}

type locationCreatedPayload struct {
	LocationID  string   `json:"locationId"`
	Name        string   `json:"name" validate:"notblank"`
	Description string   `json:"description" validate:"notblank"`
	Region      string   `json:"region,omitempty"`
	Tags        []string `json:"tags,omitempty" validate:"unique"`
}

type exitAddedPayload struct {
	FromLocationID string `json:"fromLocationId"`
	ToLocationID   string `json:"toLocationId"`
	Direction      string `json:"direction"`
	Description    string `json:"description,omitempty"`
}

type exitRemovedPayload struct {
	FromLocationID string `json:"fromLocationId"`
	Direction      string `json:"direction"`
	Reason         string `json:"reason" validate:"notblank"`
}

type npcCreatedPayload struct {
	NPCID      string `json:"npcId"`
	Name       string `json:"name" validate:"notblank"`
	Persona    string `json:"persona,omitempty"`
	Mood       string `json:"mood,omitempty"`
	LocationID string `json:"locationId"`
	FactionID  string `json:"factionId,omitempty"`
	Rank       string `json:"rank,omitempty" validate:"excluded_without=FactionID"`
}

type npcRemovedPayload struct {
	NPCID  string `json:"npcId"`
	Reason string `json:"reason" validate:"notblank"`
}

type factionCreatedPayload struct {
	FactionID   string `json:"factionId"`
	Name        string `json:"name" validate:"notblank"`
	Description string `json:"description,omitempty"`
}

type playerCreatedPayload struct {
	PlayerID   string `json:"playerId"`
	Name       string `json:"name" validate:"notblank"`
	LocationID string `json:"locationId"`
}

type itemCreatedPayload struct {
	ItemID      string `json:"itemId"`
	Name        string `json:"name" validate:"notblank"`
	Description string `json:"description,omitempty"`
	LocationID  string `json:"locationId,omitempty" validate:"excluded_with=HolderID"`
	HolderID    string `json:"holderId,omitempty"`
}

type loreFactAddedPayload struct {
	LoreID    string   `json:"loreId"`
	Title     string   `json:"title" validate:"notblank"`
	Text      string   `json:"text" validate:"notblank"`
	Tags      []string `json:"tags,omitempty" validate:"unique"`
	Canonical bool     `json:"canonical,omitempty"`
	About     []string `json:"about,omitempty" validate:"unique"`
}

var payloadTypes = map[string]func() any{
	events.KindAmbience:        func() any { return new(ambiencePayload) },
	events.KindNPCDialogue:     func() any { return new(npcDialoguePayload) },
	events.KindQuestSeed:       func() any { return new(questSeedPayload) },
	events.KindPlayerMoved:     func() any { return new(playerMovedPayload) },
	events.KindLocationCreated: func() any { return new(locationCreatedPayload) },
	events.KindExitAdded:       func() any { return new(exitAddedPayload) },
	events.KindExitRemoved:     func() any { return new(exitRemovedPayload) },
	events.KindNPCCreated:      func() any { return new(npcCreatedPayload) },
	events.KindNPCRemoved:      func() any { return new(npcRemovedPayload) },
	events.KindFactionCreated:  func() any { return new(factionCreatedPayload) },
	events.KindPlayerCreated:   func() any { return new(playerCreatedPayload) },
	events.KindItemCreated:     func() any { return new(itemCreatedPayload) },
	events.KindLoreFactAdded:   func() any { return new(loreFactAddedPayload) },
}

// decodePayload decodes a proposal payload into its Go shape, refusing unknown fields.
func decodePayload(kind string, raw json.RawMessage) (any, error) {
	mk, ok := payloadTypes[kind]
	if !ok {
		return nil, fmt.Errorf("unknown proposal kind %q", kind)
	}
	v := mk()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, fmt.Errorf("%s payload: %w", kind, err)
	}
	return v, nil
}

// contentText is the generated text of a proposal that moderation and near-duplicate detection
// look at: the fields a person reads, never ids or enumerations.
func contentText(payload any) string {
	var parts []string
	add := func(s ...string) {
		for _, x := range s {
			if strings.TrimSpace(x) != "" {
				parts = append(parts, x)
			}
		}
	}
	switch p := payload.(type) {
	case *ambiencePayload:
		add(p.Text, p.Mood)
	case *npcDialoguePayload:
		add(p.Line)
	case *questSeedPayload:
		add(p.Title, p.Hook)
		add(p.Objectives...)
	case *locationCreatedPayload:
		add(p.Name, p.Description, p.Region)
		add(p.Tags...)
	case *exitAddedPayload:
		add(p.Description)
	case *exitRemovedPayload:
		add(p.Reason)
	case *npcCreatedPayload:
		add(p.Name, p.Persona, p.Mood, p.Rank)
	case *npcRemovedPayload:
		add(p.Reason)
	case *factionCreatedPayload:
		add(p.Name, p.Description)
	case *playerCreatedPayload:
		add(p.Name)
	case *itemCreatedPayload:
		add(p.Name, p.Description)
	case *loreFactAddedPayload:
		add(p.Title, p.Text)
		add(p.Tags...)
	}
	return strings.Join(parts, "\n")
}

// contentTarget is what the content is about, for near-duplicate detection: the same words
// about a different place are not a duplicate.
func contentTarget(payload any) string {
	switch p := payload.(type) {
	case *ambiencePayload:
		return p.LocationID
	case *npcDialoguePayload:
		return p.NPCID
	case *questSeedPayload:
		return p.LocationID
	case *loreFactAddedPayload:
		return strings.Join(p.About, ",")
	case *npcCreatedPayload:
		return p.LocationID
	case *locationCreatedPayload:
		return p.Region
	}
	return ""
}
