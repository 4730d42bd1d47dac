package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// Three processor replicas share the commits and still apply each player's moves in the order
// proposed: every move commits (a move applied before the one that brings the player to its
// start would be refused), and each player's committed moves come in the order of its
// proposals. A validated proposal left on the legacy subject by gates from before partitioned
// commits is committed too.
func TestProcessorReplicasCommitEachPlayersMovesInOrder(t *testing.T) {
	e := natstest.Start(t)
	gd := graphdtest.Start(t)
	for range 3 {
		runProcessor(t, e, writer(t, gd.URL()), prometheus.NewRegistry())
	}
	const places, players = 9, 24
	loc := func(i int) string { return fmt.Sprintf("loc:r%d", i) }
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
		add(events.KindPlayerCreated, obj{"playerId": fmt.Sprintf("player:r%d", p), "name": "P", "locationId": loc(0)})
	}
	// The first location as gates before partitioned commits left it: on proposals.validated.
	legacy, err := json.Marshal(attested(setup[0]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.JS.PublishMsg(context.Background(), &nats.Msg{Subject: events.SubjectValidatedLegacy, Data: legacy}, jetstream.WithMsgID(setup[0].ProposalID)); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 20*time.Second, "the legacy proposal committed", func() bool { return committed(t, e) == 1 })
	publishAsync(t, e.JS, setup[1:], func(i int) string { return setup[i+1].ProposalID })
	natstest.WaitFor(t, 30*time.Second, "the world set up", func() bool { return committed(t, e) == uint64(len(setup)) })

	var moves []*events.Proposal
	for m := range places - 1 {
		for p := range players {
			mv := proposal(events.KindPlayerMoved, fmt.Sprintf("move-%02d-%d", p, m), obj{"playerId": fmt.Sprintf("player:r%d", p),
				"fromLocationId": loc(m), "toLocationId": loc(m + 1), "direction": "east"})
			mv.Actor = events.Actor{Kind: "player", ID: fmt.Sprintf("player:r%d", p)}
			moves = append(moves, mv)
		}
	}
	publishAsync(t, e.JS, moves, func(i int) string { return moves[i].ProposalID })
	total := uint64(len(setup) + len(moves))
	natstest.WaitFor(t, 60*time.Second, "every move decided", func() bool { return committed(t, e)+rejected(t, e) >= total && settled(t, e) })
	if n := rejected(t, e); n > 0 {
		for _, r := range readAll(t, e, events.RejectedSubject("processor")) {
			t.Log(string(r))
			break
		}
		t.Fatalf("%d moves refused: a player's move was applied before the one that brought them to its start", n)
	}
	last := map[string]int{}
	for _, raw := range readAll(t, e, events.CommittedSubject("PlayerMoved")) {
		var ev events.DomainEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		var p, m int
		if _, err := fmt.Sscanf(ev.ProposalID, "move-%02d-%d", &p, &m); err != nil {
			t.Fatalf("committed %s", ev.ProposalID)
		}
		if prev, ok := last[fmt.Sprint(p)]; ok && m != prev+1 {
			t.Fatalf("player %d: move %d committed after move %d", p, m, prev)
		}
		last[fmt.Sprint(p)] = m
	}
	if len(last) != players {
		t.Fatalf("committed moves of %d players, want %d", len(last), players)
	}
	// The replicas shared the partitions.
	busy := 0
	for _, info := range processorConsumers(t, e) {
		if info.Delivered.Consumer > 0 && info.Name != "event-processor" {
			busy++
		}
	}
	if busy < 3 {
		t.Errorf("%d partitions delivered anything", busy)
	}
}
