package events

import "slices"

// Narration is the provenance of a proposal an outside narrator wrote through mcp-propose
// (provenance.narrator, proposal schemaVersion 3): who, as the MCP server authenticated them.
// Client is the access token's client (its subject), Issuer the authorization server that
// signed it, Server and Tool where the proposal was made. It never comes from the tool's
// arguments. A narrated proposal carries no model fields (provider, model, prompt template,
// tool calls, tokens, cost): a person or an outside agent wrote it, there is nothing to
// regenerate, so its route leaves the replay gate out (NarratorRoute).
type Narration struct {
	Client string `json:"client"`
	Issuer string `json:"issuer,omitempty"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
}

// Gate names the narrator's route rule needs (the gate service declares the rest).
const (
	GateSafety = "safety"
	GateReplay = "replay"
)

// NarratorRoute is the route of a kind proposed by the narrator emitter: the kind's route
// with the replay gate left out and the safety gate always included (right after the schema
// gate when the kind's route lacks it). Text a person or an outside agent wrote reaches
// players: it is moderated; it cannot be regenerated: it is not replayed.
func NarratorRoute(route []string) []string {
	out := slices.DeleteFunc(slices.Clone(route), func(g string) bool { return g == GateReplay })
	if !slices.Contains(out, GateSafety) {
		at := 0
		if len(out) > 0 && out[0] == GateSchema {
			at = 1
		}
		out = slices.Insert(out, at, GateSafety)
	}
	return out
}

// ForEmitter returns the gates a new proposal of kind from emitter passes, in order: the
// kind's configured route, or for the narrator emitter NarratorRoute of it.
func (r Routes) ForEmitter(emitter, kind string) ([]string, error) {
	gates, err := r.For(kind)
	if err != nil || emitter != EmitterNarrator {
		return gates, err
	}
	return NarratorRoute(gates), nil
}

// emitterRoutes are every route a proposal may travel: each kind's configured route and, for
// the narrator's kinds, the narrator's route of it.
func (r Routes) emitterRoutes() [][]string {
	var out [][]string
	for _, k := range r.Kinds() {
		out = append(out, r.byKind[k])
		if EmitterMay(EmitterNarrator, k) {
			out = append(out, NarratorRoute(r.byKind[k]))
		}
	}
	return out
}

// NarratorEventTypes are the world events an outside narrator may enqueue through
// mcp-propose: requests for content (a quest seed, an NPC's answer), never a move or anything
// else that changes the world by itself. Its NATS user may publish only these subjects.
func NarratorEventTypes() []string { return []string{QuestSeedRequested, PlayerSpokeToNPC} }
