package processor_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
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

// walk is a world of places in a row, each with an exit east, and players at the first place
// (setup), then every player's moves east to the last place, interleaved across players
// (moves: move m of player p is "move-<p>-<m>", proposed by the player).
type walk struct {
	setup, moves []*events.Proposal
	players      int
}

func newWalk(tag string, places, players int) walk {
	w := walk{players: players}
	loc := func(i int) string { return fmt.Sprintf("loc:%s%d", tag, i) }
	player := func(p int) string { return fmt.Sprintf("player:%s%d", tag, p) }
	add := func(kind string, payload obj) {
		w.setup = append(w.setup, proposal(kind, fmt.Sprintf("setup-%03d", len(w.setup)), payload))
	}
	for i := range places {
		add(events.KindLocationCreated, obj{"locationId": loc(i), "name": "Place", "description": "Somewhere."})
	}
	for i := range places - 1 {
		add(events.KindExitAdded, obj{"fromLocationId": loc(i), "toLocationId": loc(i + 1), "direction": "east"})
	}
	for p := range players {
		add(events.KindPlayerCreated, obj{"playerId": player(p), "name": "P", "locationId": loc(0)})
	}
	for m := range places - 1 {
		for p := range players {
			mv := proposal(events.KindPlayerMoved, fmt.Sprintf("move-%03d-%d", p, m), obj{"playerId": player(p),
				"fromLocationId": loc(m), "toLocationId": loc(m + 1), "direction": "east"})
			mv.Actor = events.Actor{Kind: "player", ID: player(p)}
			w.moves = append(w.moves, mv)
		}
	}
	return w
}

// checkOrder fails t unless every move was decided and committed (a move applied before the one
// that brings the player to its start would be refused), each player's in the order proposed.
func (w walk) checkOrder(t *testing.T, e *natstest.Env) {
	t.Helper()
	total := uint64(len(w.setup) + len(w.moves))
	natstest.WaitFor(t, 60*time.Second, "every move decided", func() bool { return committed(t, e)+rejected(t, e) >= total && settled(t, e) })
	if n := rejected(t, e); n > 0 {
		for _, r := range readAll(t, e, events.RejectedSubject("processor")) {
			t.Log(string(r))
			break
		}
		t.Fatalf("%d moves refused: a player's move was applied before the one that brought them to its start", n)
	}
	last := map[int]int{}
	for _, raw := range readAll(t, e, events.CommittedSubject("PlayerMoved")) {
		var ev events.DomainEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		var p, m int
		if _, err := fmt.Sscanf(ev.ProposalID, "move-%03d-%d", &p, &m); err != nil {
			t.Fatalf("committed %s", ev.ProposalID)
		}
		if prev, ok := last[p]; (ok && m != prev+1) || (!ok && m != 0) {
			t.Fatalf("player %d: move %d committed after move %d", p, m, prev)
		}
		last[p] = m
	}
	if len(last) != w.players {
		t.Fatalf("committed moves of %d players, want %d", len(last), w.players)
	}
}
