package gates_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// commitMove does what the event-processor does with a validated move: the player is at loc,
// and the proposal's apply-once marker says its event was applied.
func (s *stack) commitMove(t testing.TB, p *events.Proposal, loc string) {
	t.Helper()
	for _, tr := range []*gremlingo.GraphTraversal{
		s.writer.V("player:ada").OutE("at").Drop(),
		s.writer.V("player:ada").AddE("at").To(gremlingo.T__.V(loc)),
		s.writer.AddV("AppliedEvent").Property(gremlingo.T.Id, "evt:"+events.DomainEventID(p.ProposalID, 0)).Property("proposalId", p.ProposalID),
	} {
		if err := <-tr.Iterate(); err != nil {
			t.Fatal(err)
		}
	}
}

// After a flood, moves that had already committed kept coming back to the invariant gate
// (JetStream redelivered them), and each was handed back again and again ("the player's previous
// move has not committed yet": a move back the way it came had passed since) while the player's
// later moves waited behind it: 86 moves got no outcome for 16 minutes. A move whose event is
// already applied is now settled at once wherever it comes back: acknowledged, not forwarded,
// not refused, and the player's next moves go on.
func TestACommittedMoveComingBackDoesNotHoldUpThePlayersNextMoves(t *testing.T) {
	s := newStack(t)
	cfg := testConfig()
	// A move handed back would keep the next ones waiting far longer than the waits below.
	cfg.MaxDeliver, cfg.Backoff = 5, []time.Duration{30 * time.Second}
	s.run(t, s.deps(cfg), gates.Invariant)
	move := func(from, dir, to string) *events.Proposal {
		return startAt(proposal(t, events.KindPlayerMoved, map[string]any{"playerId": "player:ada", "fromLocationId": from, "toLocationId": to, "direction": dir}), gates.Invariant)
	}
	forwarded := func() int { return s.count(t, events.StreamProposals, events.GateSubject(gates.Rate)) }

	first := move("loc:square", "north", "loc:gate")
	s.publish(t, first)
	natstest.WaitFor(t, 10*time.Second, "the first move passed", func() bool { return forwarded() == 1 })
	s.commitMove(t, first, "loc:gate")
	back := move("loc:gate", "south", "loc:square") // passes; on its way, not committed yet
	s.publish(t, back)
	natstest.WaitFor(t, 10*time.Second, "the move back passed", func() bool { return forwarded() == 2 })

	// JetStream brings the committed first move back to the gate, then the player moves on.
	data, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	s.publishRaw(t, events.GateSubject(gates.Invariant), first.ProposalID+":redelivered", data)
	next := move("loc:gate", "south", "loc:square")
	s.publish(t, next)

	natstest.WaitFor(t, 10*time.Second, "the player's next move passed behind the committed move that came back", func() bool { return forwarded() == 3 })
	natstest.WaitFor(t, 10*time.Second, "every message of the invariant gate settled", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := s.nats.JS.Consumer(ctx, events.StreamProposals, gates.Durable(gates.Invariant))
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
	if r, refused := s.rejections(t)[first.ProposalID]; refused {
		t.Fatalf("the committed move was refused when it came back: %s %s", r.Gate, r.Reason)
	}
	if got := s.proposalsOn(t, events.GateSubject(gates.Rate)); got[next.ProposalID] == nil || len(got) != 3 {
		t.Fatalf("forwarded %d proposals, want the three moves once each", len(got))
	}
}
