package events

import "strings"

// Entities are named by prefixed ids (loc:square, npc:brannoc): the prefix says what an
// entity is. This table is the one mapping from prefix to graph vertex label and to the noun
// a sentence uses.
var entityKinds = []struct{ prefix, label, noun string }{
	{"loc", "Location", "location"},
	{"npc", "NPC", "NPC"},
	{"player", "Player", "player"},
	{"faction", "Faction", "faction"},
	{"item", "Item", "item"},
	{"lore", "LoreFact", "lore fact"},
	{"quest", "QuestSeed", "quest"},
}

// EntityLabel is the graph vertex label of the entity id names ("" for an unknown prefix).
func EntityLabel(id string) string {
	prefix, _, _ := strings.Cut(id, ":")
	for _, e := range entityKinds {
		if e.prefix == prefix {
			return e.label
		}
	}
	return ""
}

// EntityName is id with the noun of its kind, for sentences: "location loc:square".
func EntityName(id string) string {
	prefix, _, _ := strings.Cut(id, ":")
	for _, e := range entityKinds {
		if e.prefix == prefix {
			return e.noun + " " + id
		}
	}
	return id
}
