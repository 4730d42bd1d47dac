package processor_test

import (
	"context"
	"encoding/json"
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
	w := newWalk("r", 9, 24)
	setup := w.setup
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

	publishAsync(t, e.JS, w.moves, func(i int) string { return w.moves[i].ProposalID })
	w.checkOrder(t, e)
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
