package events

import "slices"

// Emitter roles: who may put a new proposal into the chain, each on its own subject
// (EmitSubject) that only its NATS user may publish to.
const (
	EmitterAmbience     = "ambience"      // ai-worker agent role
	EmitterNPCDialogue  = "npc-dialogue"  // ai-worker agent role
	EmitterQuestPlanner = "quest-planner" // ai-worker agent role
	EmitterWorldRules   = "world-rules"   // ai-worker agent role (deterministic)
	EmitterNarrator     = "narrator"      // mcp-propose: a person's narration tool
	EmitterWorldLoader  = "world-loader"  // world files
	EmitterOperator     = "operator"      // operators' world building
)

// worldBuilding are the kinds that build the world (world files, operators): those whose
// KindInfo says WorldBuilding, so a new world-building kind needs no line here.
var worldBuilding = func() []string {
	var out []string
	for _, k := range kinds {
		if k.WorldBuilding {
			out = append(out, k.Kind)
		}
	}
	return out
}()

var emitterKinds = map[string][]string{
	EmitterAmbience:     {KindAmbience},
	EmitterNPCDialogue:  {KindNPCDialogue},
	EmitterQuestPlanner: {KindQuestSeed},
	EmitterWorldRules:   {KindPlayerMoved},
	EmitterNarrator:     {KindAmbience, KindNPCDialogue, KindQuestSeed},
	EmitterWorldLoader:  worldBuilding,
	EmitterOperator:     worldBuilding,
}

// Emitters lists every emitter role.
func Emitters() []string {
	return []string{EmitterAmbience, EmitterNPCDialogue, EmitterQuestPlanner, EmitterWorldRules, EmitterNarrator, EmitterWorldLoader, EmitterOperator}
}

// EmitterKinds returns the proposal kinds emitter may propose (nil for an unknown emitter).
func EmitterKinds(emitter string) []string { return slices.Clone(emitterKinds[emitter]) }

// EmitterMay reports whether emitter may propose kind.
func EmitterMay(emitter, kind string) bool { return slices.Contains(emitterKinds[emitter], kind) }
