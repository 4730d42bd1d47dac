package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// KindInfo defines a proposal kind once: the domain event it becomes, whether it destroys
// something (destructive kinds wait for a person's approval), whether its text reaches players
// (its route must pass the safety gate), and its payload's Go type. The payload's JSON Schema
// is schemas.ProposalPayload(Kind); the Go type carries the struct rules JSON Schema cannot
// express (validate tags) and what the gates and the event-processor read (Payload). Gates,
// the event-processor, fallback content and the world file all use these types.
type KindInfo struct {
	Kind        string
	DomainType  string
	Destructive bool
	// PlayerText: the payload carries text that reaches players (generated content, world
	// building). Moves carry none; removals only an operator's reason.
	PlayerText bool
	// WorldBuilding: the kind builds the world, so the world loader (world files) and operators
	// may propose it (events.EmitterKinds derives their kinds from it).
	WorldBuilding bool
	// New returns a new, empty payload of the kind (a pointer), to decode into.
	New func() Payload
}

// Payload is a proposal payload: what the gates read of it.
type Payload interface {
	// Content is what people read (the safety and dedup gates' input): the fields a person reads,
	// never ids or enumerations, one per line.
	Content() string
	// Target is what the content is about (near-duplicates are compared per kind and target:
	// the dedup scope; dialogue is per NPC–player pair, issue #20),
	// "" when nothing in particular.
	Target() string
	// References are the entities that must exist for the proposal to apply.
	References() []string
	// Creates is the entity the proposal creates ("" for none): it must not exist yet.
	Creates() string
}

var kinds = []KindInfo{
	{Kind: KindAmbience, DomainType: "AmbienceGenerated", PlayerText: true, New: func() Payload { return new(AmbiencePayload) }},
	{Kind: KindNPCDialogue, DomainType: "NPCDialogueAccepted", PlayerText: true, New: func() Payload { return new(NPCDialoguePayload) }},
	{Kind: KindQuestSeed, DomainType: "QuestSeeded", PlayerText: true, New: func() Payload { return new(QuestSeedPayload) }},
	{Kind: KindPlayerMoved, DomainType: "PlayerMoved", New: func() Payload { return new(PlayerMovedPayload) }},
	{Kind: KindLocationCreated, DomainType: "LocationCreated", PlayerText: true, WorldBuilding: true, New: func() Payload { return new(LocationCreatedPayload) }},
	{Kind: KindExitAdded, DomainType: "ExitAdded", PlayerText: true, WorldBuilding: true, New: func() Payload { return new(ExitAddedPayload) }},
	{Kind: KindExitRemoved, DomainType: "ExitRemoved", Destructive: true, WorldBuilding: true, New: func() Payload { return new(ExitRemovedPayload) }},
	{Kind: KindNPCCreated, DomainType: "NPCCreated", PlayerText: true, WorldBuilding: true, New: func() Payload { return new(NPCCreatedPayload) }},
	{Kind: KindNPCRemoved, DomainType: "NPCRemoved", Destructive: true, WorldBuilding: true, New: func() Payload { return new(NPCRemovedPayload) }},
	{Kind: KindFactionCreated, DomainType: "FactionCreated", PlayerText: true, WorldBuilding: true, New: func() Payload { return new(FactionCreatedPayload) }},
	{Kind: KindPlayerCreated, DomainType: "PlayerCreated", PlayerText: true, WorldBuilding: true, New: func() Payload { return new(PlayerCreatedPayload) }},
	{Kind: KindItemCreated, DomainType: "ItemCreated", PlayerText: true, WorldBuilding: true, New: func() Payload { return new(ItemCreatedPayload) }},
	{Kind: KindLoreFactAdded, DomainType: "LoreFactAdded", PlayerText: true, WorldBuilding: true, New: func() Payload { return new(LoreFactAddedPayload) }},
}

// Kinds lists every proposal kind of this version of the contract.
func Kinds() []KindInfo { return append([]KindInfo(nil), kinds...) }

// DecodePayload decodes a proposal payload of kind into its Go type, refusing unknown fields.
// It does not validate against the schema (Decoder.Proposal and ValidatePayload do).
func DecodePayload(kind string, raw json.RawMessage) (Payload, error) {
	info, ok := LookupKind(kind)
	if !ok {
		return nil, fmt.Errorf("unknown proposal kind %q", kind)
	}
	v := info.New()
	if err := strictUnmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("%s payload: %w", kind, err)
	}
	return v, nil
}

// PayloadRules applies a payload's struct rules (its validate tags), with paths under prefix.
func PayloadRules(p Payload, prefix string) []Problem {
	probs := structRules(p, prefix)
	for i := range probs {
		probs[i].Code = ProblemInvalidPayload
	}
	return probs
}

// Encode is the payload as JSON (for a proposal's Payload field).
func Encode(p Payload) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// lines joins the non-blank texts, one per line.
func lines(texts ...string) string {
	var parts []string
	for _, t := range texts {
		if strings.TrimSpace(t) != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

// ids drops empty ids.
func ids(list ...string) []string {
	out := make([]string, 0, len(list))
	for _, id := range list {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

// AmbiencePayload is the payload of an ambience proposal: a description of a location's mood.
type AmbiencePayload struct {
	LocationID string `json:"locationId"`
	Text       string `json:"text" validate:"notblank"`
	Mood       string `json:"mood"`
}

func (p *AmbiencePayload) Content() string      { return lines(p.Text, p.Mood) }
func (p *AmbiencePayload) Target() string       { return p.LocationID }
func (p *AmbiencePayload) References() []string { return ids(p.LocationID) }
func (p *AmbiencePayload) Creates() string      { return "" }

// NPCDialoguePayload is an NPC's line to a player.
type NPCDialoguePayload struct {
	NPCID      string `json:"npcId"`
	PlayerID   string `json:"playerId"`
	LocationID string `json:"locationId"`
	Line       string `json:"line" validate:"notblank"`
	Intent     string `json:"intent"`
	// PlayerSaid is what the player said to the NPC, as the ai-worker's input rail left it
	// (personal data redacted; empty when the rail blocked it). The trigger binds it, never the
	// model; the interaction memory keeps it from the committed event (schemaVersion 4).
	PlayerSaid string `json:"playerSaid,omitempty"`
}

// Content is the NPC's line: what the safety gate moderates. The player's words (PlayerSaid)
// were moderated by the input rail before any model read them; words it flags as injection
// are kept as data and answered, so the gate must not refuse the line for them (Quoted).
func (p *NPCDialoguePayload) Content() string { return lines(p.Line) }

// Quoted is the player's words the line answers (PlayerSaid).
func (p *NPCDialoguePayload) Quoted() string { return p.PlayerSaid }

// Quoting is a payload that quotes a player's words beside its own content (npc_dialogue's
// playerSaid). The input rail checked them before any model read them and lets an honest quote
// carry only plain words (personal data redacted, injection phrasings kept as data); the safety
// gate refuses a quote that carries anything else, so that no compromised emitter commits
// through it what the rail would have stopped.
type Quoting interface{ Quoted() string }

func (p *NPCDialoguePayload) Target() string       { return p.NPCID + "|" + p.PlayerID }
func (p *NPCDialoguePayload) References() []string { return ids(p.NPCID, p.PlayerID, p.LocationID) }
func (p *NPCDialoguePayload) Creates() string      { return "" }

// QuestSeedPayload is the seed of a quest at a location.
type QuestSeedPayload struct {
	QuestID    string   `json:"questId"`
	LocationID string   `json:"locationId"`
	Title      string   `json:"title" validate:"notblank"`
	Hook       string   `json:"hook" validate:"notblank"`
	Objectives []string `json:"objectives" validate:"unique,dive,notblank"`
	Involves   []string `json:"involves,omitempty" validate:"unique"`
}

func (p *QuestSeedPayload) Content() string {
	return lines(append([]string{p.Title, p.Hook}, p.Objectives...)...)
}
func (p *QuestSeedPayload) Target() string { return p.LocationID }

// References are the location and the entities the quest involves (other quests need not exist).
func (p *QuestSeedPayload) References() []string {
	out := ids(p.LocationID)
	for _, id := range p.Involves {
		if !strings.HasPrefix(id, "quest:") {
			out = append(out, ids(id)...)
		}
	}
	return out
}
func (p *QuestSeedPayload) Creates() string { return "" }

// The payload of a player_moved proposal is PlayerMovedPayload, the Player.Moved event's:
// the world-rules agent proposes exactly the move the game will be told about.

func (p *PlayerMovedPayload) Content() string { return "" }
func (p *PlayerMovedPayload) Target() string  { return p.PlayerID }
func (p *PlayerMovedPayload) References() []string {
	return ids(p.PlayerID, p.FromLocationID, p.ToLocationID)
}
func (p *PlayerMovedPayload) Creates() string { return "" }

// LocationCreatedPayload creates a location.
type LocationCreatedPayload struct {
	LocationID  string   `json:"locationId"`
	Name        string   `json:"name" validate:"notblank"`
	Description string   `json:"description" validate:"notblank"`
	Region      string   `json:"region,omitempty"`
	Tags        []string `json:"tags,omitempty" validate:"unique"`
}

func (p *LocationCreatedPayload) Content() string {
	return lines(append([]string{p.Name, p.Description, p.Region}, p.Tags...)...)
}
func (p *LocationCreatedPayload) Target() string       { return p.Region }
func (p *LocationCreatedPayload) References() []string { return nil }
func (p *LocationCreatedPayload) Creates() string      { return p.LocationID }

// ExitAddedPayload adds an exit from one location to another.
type ExitAddedPayload struct {
	FromLocationID string `json:"fromLocationId"`
	ToLocationID   string `json:"toLocationId"`
	Direction      string `json:"direction"`
	Description    string `json:"description,omitempty"`
}

func (p *ExitAddedPayload) Content() string      { return lines(p.Description) }
func (p *ExitAddedPayload) Target() string       { return "" }
func (p *ExitAddedPayload) References() []string { return ids(p.FromLocationID, p.ToLocationID) }
func (p *ExitAddedPayload) Creates() string      { return "" }

// ExitRemovedPayload removes a location's exit (destructive).
type ExitRemovedPayload struct {
	FromLocationID string `json:"fromLocationId"`
	Direction      string `json:"direction"`
	Reason         string `json:"reason" validate:"notblank"`
}

func (p *ExitRemovedPayload) Content() string      { return lines(p.Reason) }
func (p *ExitRemovedPayload) Target() string       { return "" }
func (p *ExitRemovedPayload) References() []string { return ids(p.FromLocationID) }
func (p *ExitRemovedPayload) Creates() string      { return "" }

// NPCCreatedPayload creates an NPC at a location, optionally in a faction.
type NPCCreatedPayload struct {
	NPCID      string `json:"npcId"`
	Name       string `json:"name" validate:"notblank"`
	Persona    string `json:"persona,omitempty"`
	Mood       string `json:"mood,omitempty"`
	LocationID string `json:"locationId"`
	FactionID  string `json:"factionId,omitempty"`
	Rank       string `json:"rank,omitempty" validate:"excluded_without=FactionID"`
}

func (p *NPCCreatedPayload) Content() string      { return lines(p.Name, p.Persona, p.Mood, p.Rank) }
func (p *NPCCreatedPayload) Target() string       { return p.LocationID }
func (p *NPCCreatedPayload) References() []string { return ids(p.LocationID, p.FactionID) }
func (p *NPCCreatedPayload) Creates() string      { return p.NPCID }

// NPCRemovedPayload removes an NPC (destructive).
type NPCRemovedPayload struct {
	NPCID  string `json:"npcId"`
	Reason string `json:"reason" validate:"notblank"`
}

func (p *NPCRemovedPayload) Content() string      { return lines(p.Reason) }
func (p *NPCRemovedPayload) Target() string       { return "" }
func (p *NPCRemovedPayload) References() []string { return ids(p.NPCID) }
func (p *NPCRemovedPayload) Creates() string      { return "" }

// FactionCreatedPayload creates a faction.
type FactionCreatedPayload struct {
	FactionID   string `json:"factionId"`
	Name        string `json:"name" validate:"notblank"`
	Description string `json:"description,omitempty"`
}

func (p *FactionCreatedPayload) Content() string      { return lines(p.Name, p.Description) }
func (p *FactionCreatedPayload) Target() string       { return "" }
func (p *FactionCreatedPayload) References() []string { return nil }
func (p *FactionCreatedPayload) Creates() string      { return p.FactionID }

// PlayerCreatedPayload creates a player at a location.
type PlayerCreatedPayload struct {
	PlayerID   string `json:"playerId"`
	Name       string `json:"name" validate:"notblank"`
	LocationID string `json:"locationId"`
}

func (p *PlayerCreatedPayload) Content() string      { return lines(p.Name) }
func (p *PlayerCreatedPayload) Target() string       { return "" }
func (p *PlayerCreatedPayload) References() []string { return ids(p.LocationID) }
func (p *PlayerCreatedPayload) Creates() string      { return p.PlayerID }

// ItemCreatedPayload creates an item lying at a location or held by an NPC or player.
type ItemCreatedPayload struct {
	ItemID      string `json:"itemId"`
	Name        string `json:"name" validate:"notblank"`
	Description string `json:"description,omitempty"`
	LocationID  string `json:"locationId,omitempty" validate:"excluded_with=HolderID"`
	HolderID    string `json:"holderId,omitempty"`
}

func (p *ItemCreatedPayload) Content() string      { return lines(p.Name, p.Description) }
func (p *ItemCreatedPayload) Target() string       { return "" }
func (p *ItemCreatedPayload) References() []string { return ids(p.LocationID, p.HolderID) }
func (p *ItemCreatedPayload) Creates() string      { return p.ItemID }

// LoreFactAddedPayload adds a curated fact, optionally about entities.
type LoreFactAddedPayload struct {
	LoreID    string   `json:"loreId"`
	Title     string   `json:"title" validate:"notblank"`
	Text      string   `json:"text" validate:"notblank"`
	Tags      []string `json:"tags,omitempty" validate:"unique"`
	Canonical bool     `json:"canonical,omitempty"`
	About     []string `json:"about,omitempty" validate:"unique"`
}

func (p *LoreFactAddedPayload) Content() string {
	return lines(append([]string{p.Title, p.Text}, p.Tags...)...)
}
func (p *LoreFactAddedPayload) Target() string       { return strings.Join(p.About, ",") }
func (p *LoreFactAddedPayload) References() []string { return ids(p.About...) }
func (p *LoreFactAddedPayload) Creates() string      { return p.LoreID }
