package aiworker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
)

// A player's move requests are proposed in the order the game sent them, even when a worker
// died holding the first: a restarted worker takes nothing until the held request can be
// redelivered first. Before, the later moves were proposed at once and the first one an ack
// wait later, and the event-processor refused the later ones ("moved since the move was
// proposed").
func TestWorldRulesKeepsAPlayersOrderAcrossACrash(t *testing.T) {
	s := startStack(t, stackOpts{noApp: true})
	var sent []string
	for _, m := range []events.PlayerMoveRequestedPayload{
		{PlayerID: "player:ada", FromLocationID: "loc:square", Direction: "north"},
		{PlayerID: "player:ada", FromLocationID: "loc:gate", Direction: "south"},
		{PlayerID: "player:ada", FromLocationID: "loc:square", Direction: "east"},
	} {
		sent = append(sent, s.publish(events.PlayerMoveRequested, m).EventID)
	}
	// The worker that dies: the world-rules consumer as the worker configures it, the first
	// request fetched and never acknowledged.
	rules := roles.MustLookup(roles.WorldRules)
	const ackWait = time.Second
	spec := runtime.Consumer{Stream: events.StreamWorld, Durable: rules.Durable(), Subjects: []string{rules.Subject()}, AckWait: ackWait}
	natstest.DieHolding(t, s.nats.JS, spec.Stream, spec.ServerConfig())

	deps := s.deps
	deps.Roles = []string{roles.WorldRules}
	deps.AckWait = ackWait
	s.startWorker(deps)
	var got []string
	for _, st := range s.waitProposals(schemaSubject, 3) {
		got = append(got, st.p.CausationID)
	}
	if !slices.Equal(got, sent) {
		t.Fatalf("moves proposed for events %v, want the order they were sent: %v", got, sent)
	}
}
