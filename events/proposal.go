package events

import (
	"encoding/json"
	"time"
)

// ProposalSchemaVersion is the proposal format version this module writes. Version 2 added the
// attestation of each hop (keyId, sig, emitter, approver): a version 1 proposal still in flight
// after an upgrade carries no attestations, so it is refused with a reason that says so (see
// OldSchemaVersionReason) and its emitter proposes it again. Version 3 added
// provenance.narrator (an outside narrator's proposal, which carries no model fields): a
// version 2 proposal in flight is still accepted (it cannot carry the field). Version 4 added
// the npc_dialogue payload's playerSaid (the player's words as the input rail left them, which
// the interaction memory keeps): versions 2 and 3 in flight are still accepted (they cannot
// carry it).
const ProposalSchemaVersion = "4"

// attestedSchemaVersion is the first version with attested hops.
const attestedSchemaVersion = "2"

// ProposalSchemaAccepted reports whether the gates and the event-processor accept proposals of
// schema version v: ProposalSchemaVersion and the versions since the attested hops.
func ProposalSchemaAccepted(v string) bool {
	return v == ProposalSchemaVersion || v == "3" || v == attestedSchemaVersion
}

// OldSchemaVersionReason is why a proposal of an older schema version is refused.
func OldSchemaVersionReason(got string) string {
	return "The proposal has schemaVersion " + got + ", which predates attested gate decisions (schemaVersion " +
		attestedSchemaVersion + "): a proposal in flight across the upgrade cannot prove the gates it passed; propose it again."
}

// Proposal is a suggested change to the world. Agents emit it; gates check it along its route;
// only the event-processor turns a validated one into domain events.
type Proposal struct {
	ProposalID       string          `json:"proposalId"`
	Kind             string          `json:"kind"`
	SchemaVersion    string          `json:"schemaVersion"`
	CorrelationID    string          `json:"correlationId"`
	CausationID      string          `json:"causationId"`
	AgentRole        string          `json:"agentRole"`
	Actor            Actor           `json:"actor"`
	Payload          json.RawMessage `json:"payload"`
	Provenance       *Provenance     `json:"provenance,omitempty"`
	Route            Route           `json:"route"`
	Attempt          int             `json:"attempt"`
	RequiresApproval bool            `json:"requiresApproval"`
	CreatedUTC       time.Time       `json:"createdUtc"`
	OriginUTC        *time.Time      `json:"originUtc,omitempty"`
}

// Provenance records everything needed to explain and regenerate an AI decision, or, for an
// outside narrator's proposal, who wrote it (Narrator, and none of the model fields).
type Provenance struct {
	Provider       string       `json:"provider,omitempty"`
	Model          string       `json:"model,omitempty"`
	PromptTemplate *TemplateRef `json:"promptTemplate,omitempty"`
	ContextHash    string       `json:"contextHash,omitempty"`
	ToolCalls      []ToolCall   `json:"toolCalls,omitempty"`
	Tokens         Tokens       `json:"tokens,omitzero"`
	CostUSD        float64      `json:"costUsd,omitzero"`
	Temperature    float64      `json:"temperature,omitzero"`
	Seed           int64        `json:"seed,omitzero"`
	LatencyMs      float64      `json:"latencyMs,omitzero"`
	CacheHit       bool         `json:"cacheHit,omitempty"`
	Fallback       string       `json:"fallback,omitempty"`
	// InputRail is what the input rail did with the player's words (schemaVersion 2).
	InputRail *InputRail `json:"inputRail,omitempty"`
	// Narrator is the outside narrator who wrote the proposal through mcp-propose
	// (schemaVersion 3); a narrated proposal has no model fields.
	Narrator *Narration `json:"narrator,omitempty"`
}

// TemplateRef names the exact prompt template text an AI decision used.
type TemplateRef struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
}

// ToolCall is one MCP tool call made while building a proposal's context. Result keeps the
// result as the model saw it, so the replay gate can recompute the context hash.
type ToolCall struct {
	Server     string          `json:"server"`
	Tool       string          `json:"tool"`
	ArgsHash   string          `json:"argsHash"`
	ResultHash string          `json:"resultHash"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
}

// Tokens counts an LLM call's tokens; Cached is the part of Prompt served from the provider's cache.
type Tokens struct {
	Prompt     int `json:"prompt"`
	Completion int `json:"completion"`
	Cached     int `json:"cached"`
}

// Route is the proposal's routing slip: the gates still to pass, and what each passed gate said.
type Route struct {
	Pending []string `json:"pending"`
	Trail   []Hop    `json:"trail,omitempty"`
}

// Hop outcomes.
const (
	OutcomePassed   = "passed"
	OutcomeRejected = "rejected"
	OutcomeHeld     = "held"
	OutcomeApproved = "approved"
)

// Hop is one gate's decision on the proposal, attested: Sig is the gate's signature (key KeyID)
// over the proposal id, the digest of the proposal's content (everything but the route), the
// gate, the outcome, the round (how many times the gate decided on it before), Emitter and
// Approver. The event-processor commits a proposal only if every gate of its kind's configured
// route passed it, in order, with a valid signature (shared/attest).
type Hop struct {
	Gate       string    `json:"gate"`
	Outcome    string    `json:"outcome"`
	Code       string    `json:"code,omitempty"`
	At         time.Time `json:"at"`
	DurationMs float64   `json:"durationMs"`
	// Emitter is the role that published the proposal, as the schema gate read it from the
	// subject the NATS server let that role publish to (proposals.emit.<emitter>).
	Emitter string `json:"emitter,omitempty"`
	// Approver is the authenticated person who approved (approval gate's "approved" hop).
	Approver string `json:"approver,omitempty"`
	KeyID    string `json:"keyId,omitempty"`
	Sig      string `json:"sig,omitempty"`
}

// Next is the subject the proposal goes to after its current gate: the next pending gate, or,
// when none is left, its partition's entry (ValidatedSubject of its actor).
func (p *Proposal) Next() string {
	if len(p.Route.Pending) > 0 {
		return GateSubject(p.Route.Pending[0])
	}
	key := p.ProposalID
	if p.Actor.ID != "" {
		key = p.Actor.Kind + ":" + p.Actor.ID
	}
	return ValidatedSubject(key)
}

// Proposal kinds. Each has a payload schema at schemas/v1/proposals/<kind>.json.
const (
	KindAmbience        = "ambience"
	KindNPCDialogue     = "npc_dialogue"
	KindQuestSeed       = "quest_seed"
	KindPlayerMoved     = "player_moved"
	KindLocationCreated = "location_created"
	KindExitAdded       = "exit_added"
	KindExitRemoved     = "exit_removed"
	KindNPCCreated      = "npc_created"
	KindNPCRemoved      = "npc_removed"
	KindFactionCreated  = "faction_created"
	KindPlayerCreated   = "player_created"
	KindItemCreated     = "item_created"
	KindLoreFactAdded   = "lore_fact_added"
)

// LookupKind returns what is known of kind, and false for an unknown kind.
func LookupKind(kind string) (KindInfo, bool) {
	for _, k := range kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindInfo{}, false
}
