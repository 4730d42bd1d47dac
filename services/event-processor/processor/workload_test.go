package processor_test

import (
	"fmt"

	"github.com/worldgate/worldgate/events"
)

// workload is a world of n proposals (n ≥ 200) and the graph it must leave: locations in a row
// with exits both ways, factions, NPCs, players that walk east (order-dependent moves),
// ambience, items and lore. Every proposal commits; none conflicts when applied in order.
type workload struct {
	proposals []*events.Proposal
	vertices  map[string]int64
	edges     map[string]int64
	players   int
	moves     int // per player
}

func newWorkload(prefix string, n int) workload {
	nLoc := n / 10
	nPlayers := nLoc / 5
	moves := 4
	nFac := 5
	nNPC := nLoc / 2
	nItem := nLoc / 2
	nLore := nLoc / 4
	fixed := nLoc + 2*(nLoc-1) + nFac + nNPC + nPlayers + nPlayers*moves + nItem + nLore
	nAmb := n - fixed
	w := workload{players: nPlayers, moves: moves}
	add := func(kind string, payload any) {
		id := fmt.Sprintf("%s-%05d", prefix, len(w.proposals))
		w.proposals = append(w.proposals, proposal(kind, id, payload))
	}
	loc := func(i int) string { return fmt.Sprintf("loc:%s-%d", prefix, i) }
	for i := 0; i < nLoc; i++ {
		add(events.KindLocationCreated, obj{"locationId": loc(i), "name": fmt.Sprintf("Place %d", i), "description": "Somewhere."})
	}
	for i := 0; i+1 < nLoc; i++ {
		add(events.KindExitAdded, obj{"fromLocationId": loc(i), "toLocationId": loc(i + 1), "direction": "east"})
		add(events.KindExitAdded, obj{"fromLocationId": loc(i + 1), "toLocationId": loc(i), "direction": "west"})
	}
	for f := 0; f < nFac; f++ {
		add(events.KindFactionCreated, obj{"factionId": fmt.Sprintf("faction:%s-%d", prefix, f), "name": "Faction"})
	}
	for i := 0; i < nNPC; i++ {
		add(events.KindNPCCreated, obj{"npcId": fmt.Sprintf("npc:%s-%d", prefix, i), "name": "NPC", "locationId": loc(i),
			"factionId": fmt.Sprintf("faction:%s-%d", prefix, i%nFac), "rank": "member"})
	}
	for p := 0; p < nPlayers; p++ {
		add(events.KindPlayerCreated, obj{"playerId": fmt.Sprintf("player:%s-%d", prefix, p), "name": "P", "locationId": loc(p)})
	}
	// Moves interleave across players, so each player's moves are spread over the stream.
	for m := 0; m < moves; m++ {
		for p := 0; p < nPlayers; p++ {
			add(events.KindPlayerMoved, obj{"playerId": fmt.Sprintf("player:%s-%d", prefix, p), "fromLocationId": loc(p + m),
				"toLocationId": loc(p + m + 1), "direction": "east"})
		}
	}
	for i := 0; i < nItem; i++ {
		add(events.KindItemCreated, obj{"itemId": fmt.Sprintf("item:%s-%d", prefix, i), "name": "Thing", "locationId": loc(i)})
	}
	for i := 0; i < nLore; i++ {
		add(events.KindLoreFactAdded, obj{"loreId": fmt.Sprintf("lore:%s-%d", prefix, i), "title": "Fact", "text": "True.", "about": []string{loc(i)}})
	}
	for i := 0; i < nAmb; i++ {
		add(events.KindAmbience, obj{"locationId": loc(i % nLoc), "text": "Wind.", "mood": "calm"})
	}
	w.vertices = map[string]int64{"Location": int64(nLoc), "Faction": int64(nFac), "NPC": int64(nNPC), "Player": int64(nPlayers),
		"Item": int64(nItem), "LoreFact": int64(nLore), "Ambience": int64(nAmb), "AppliedEvent": int64(n)}
	w.edges = map[string]int64{"exit": int64(2 * (nLoc - 1)), "at": int64(nNPC + nPlayers + nItem), "member_of": int64(nNPC),
		"about": int64(nLore), "describes": int64(nAmb)}
	return w
}
