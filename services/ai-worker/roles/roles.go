// Package roles defines the ai-worker's agent roles as data: what triggers each role, which
// prompt template and model purpose it uses, which MCP tools it may call, and which proposal kind
// it emits. The small policy each role needs (which trigger fields bind the proposal's ids)
// lives next to the data. It does no I/O and knows nothing of NATS, MCP sessions or models.
package roles

import (
	"fmt"
	"slices"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/llm"
)

// Role names. They are the proposal's agentRole and name the durable consumer (ai-<role>).
const (
	Ambience     = "ambience"
	NPCDialogue  = "npc-dialogue"
	QuestPlanner = "quest-planner"
	WorldRules   = "world-rules"
)

// The purposes of the LLM roles: they label calls and metrics, and select the model tier
// (the tier of each purpose is configured in one place, llmsetup.DefaultConfig or the
// -llm-config file).
const (
	PurposeAmbience    llm.Purpose = "ambience"
	PurposeNPCDialogue llm.Purpose = "npc_dialogue"
	PurposeQuestSeed   llm.Purpose = "quest_seed"
)

// Role is one agent role.
type Role struct {
	Name string
	// Trigger is the world event type the role consumes from stream WORLD.
	Trigger string
	// Kind is the proposal kind the role emits; the model never chooses it.
	Kind string
	// Purpose labels LLM calls and metrics and selects the model tier.
	Purpose llm.Purpose
	// Template is the prompt template id ("" for a role without an LLM).
	Template string
	// Tools is the role's MCP tool allow-list.
	Tools []string
	// Required are the tools without which the role cannot ground its content: when one is not
	// offered (its server is down) the role proposes fallback content instead.
	Required []string
	// UsesLLM is false for deterministic roles (world-rules).
	UsesLLM bool
}

// Durable is the name of the role's durable consumer on stream WORLD.
func (r Role) Durable() string { return "ai-" + r.Name }

// Subject is the subject the role consumes.
func (r Role) Subject() string { return events.Subject(r.Trigger) }

// Allows reports whether tool is on the role's allow-list.
func (r Role) Allows(tool string) bool { return slices.Contains(r.Tools, tool) }

var all = []Role{
	{
		Name: Ambience, Trigger: events.PlayerMoved, Kind: events.KindAmbience,
		Purpose: PurposeAmbience, Template: "ambience", UsesLLM: true,
		Tools:    []string{"get-location", "list-exits", "search-lore", "list-recent-events"},
		Required: []string{"get-location"},
	},
	{
		Name: NPCDialogue, Trigger: events.PlayerSpokeToNPC, Kind: events.KindNPCDialogue,
		Purpose: PurposeNPCDialogue, Template: "npc-dialogue", UsesLLM: true,
		Tools:    []string{"get-location", "get-player-state", "get-recent-dialogue", "get-canonical-fact", "search-lore", "classify-intent"},
		Required: []string{"get-location"},
	},
	{
		Name: QuestPlanner, Trigger: events.QuestSeedRequested, Kind: events.KindQuestSeed,
		Purpose: PurposeQuestSeed, Template: "quest-seed", UsesLLM: true,
		Tools:    []string{"get-location", "list-exits", "get-player-state", "get-neighbors", "list-recent-events", "search-lore", "get-canonical-fact"},
		Required: []string{"get-location", "search-lore"},
	},
	{
		Name: WorldRules, Trigger: events.PlayerMoveRequested, Kind: events.KindPlayerMoved,
		Purpose:  llm.Purpose(events.KindPlayerMoved),
		Tools:    []string{"get-location", "list-exits"},
		Required: []string{"list-exits"},
	},
}

// All returns every role.
func All() []Role { return slices.Clone(all) }

// Names returns every role name.
func Names() []string {
	out := make([]string, len(all))
	for i, r := range all {
		out[i] = r.Name
	}
	return out
}

// Lookup returns the role named name.
func Lookup(name string) (Role, bool) {
	for _, r := range all {
		if r.Name == name {
			return r, true
		}
	}
	return Role{}, false
}

// Select returns the roles named in names (all of them for an empty list), or an error
// naming an unknown one.
func Select(names []string) ([]Role, error) {
	if len(names) == 0 {
		return All(), nil
	}
	var out []Role
	for _, n := range names {
		r, ok := Lookup(n)
		if !ok {
			return nil, fmt.Errorf("unknown agent role %q: use one of %v", n, Names())
		}
		if !slices.ContainsFunc(out, func(o Role) bool { return o.Name == n }) {
			out = append(out, r)
		}
	}
	return out, nil
}

// MustLookup is Lookup for role names fixed in code; it panics on an unknown name.
func MustLookup(name string) Role {
	r, ok := Lookup(name)
	if !ok {
		panic("roles: unknown role " + name)
	}
	return r
}
