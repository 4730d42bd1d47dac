package processor_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// Under a backlog of many players' moves, the moves the processor applies at the same moment
// share graph requests, and still every move commits (a move applied before the one that
// brings the player to its start would be refused) in each player's order.
func TestBatchedMovesCommitInEachPlayersOrder(t *testing.T) {
	e := natstest.Start(t)
	gd := graphdtest.Start(t)
	reg := prometheus.NewRegistry()
	runProcessor(t, e, writer(t, gd.URL()), reg)
	const places, players = 6, 150
	loc := func(i int) string { return fmt.Sprintf("loc:b%d", i) }
	var setup []*events.Proposal
	add := func(kind string, payload obj) {
		setup = append(setup, proposal(kind, fmt.Sprintf("setup-%03d", len(setup)), payload))
	}
	for i := range places {
		add(events.KindLocationCreated, obj{"locationId": loc(i), "name": "Place", "description": "Somewhere."})
	}
	for i := range places - 1 {
		add(events.KindExitAdded, obj{"fromLocationId": loc(i), "toLocationId": loc(i + 1), "direction": "east"})
	}
	for p := range players {
		add(events.KindPlayerCreated, obj{"playerId": fmt.Sprintf("player:b%d", p), "name": "P", "locationId": loc(0)})
	}
	publishAsync(t, e.JS, setup, func(i int) string { return setup[i].ProposalID })
	natstest.WaitFor(t, 30*time.Second, "the world set up", func() bool { return committed(t, e) == uint64(len(setup)) })
	requests0, writes0 := batchSizes(t, reg)

	var moves []*events.Proposal
	for m := range places - 1 {
		for p := range players {
			mv := proposal(events.KindPlayerMoved, fmt.Sprintf("move-%03d-%d", p, m), obj{"playerId": fmt.Sprintf("player:b%d", p),
				"fromLocationId": loc(m), "toLocationId": loc(m + 1), "direction": "east"})
			mv.Actor = events.Actor{Kind: "player", ID: fmt.Sprintf("player:b%d", p)}
			moves = append(moves, mv)
		}
	}
	publishAsync(t, e.JS, moves, func(i int) string { return moves[i].ProposalID })
	total := uint64(len(setup) + len(moves))
	natstest.WaitFor(t, 60*time.Second, "every move decided", func() bool { return committed(t, e)+rejected(t, e) >= total && settled(t, e) })
	if n := rejected(t, e); n > 0 {
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
	if len(last) != players {
		t.Fatalf("committed moves of %d players, want %d", len(last), players)
	}
	requests, writes := batchSizes(t, reg)
	requests, writes = requests-requests0, writes-writes0
	if writes != uint64(len(moves)) || requests >= writes {
		t.Fatalf("%d graph requests carried %d moves' writes: want every move's, in fewer requests (batched)", requests, writes)
	}
	t.Logf("%d graph requests carried %d moves' writes", requests, writes)
}

// batchSizes returns how many graph requests the processor made and how many proposals' writes
// they carried.
func batchSizes(t *testing.T, reg *prometheus.Registry) (requests, writes uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "worldgate_commit_batch_size" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), uint64(h.GetSampleSum())
		}
	}
	t.Fatal("no worldgate_commit_batch_size")
	return 0, 0
}
