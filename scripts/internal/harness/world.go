package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/worldgate/worldfile"
	"github.com/worldgate/worldgate/shared/runtime"
)

// The bench world: two rooms joined by a north/south exit and the players who walk between
// them. Every player starts in RoomA.
const (
	RoomA = "loc:bench-hall"
	RoomB = "loc:bench-yard"
)

// BenchWorld returns the world the load runs in: the two rooms and players bench-0 … bench-<n-1>.
func BenchWorld(players int) *worldfile.World {
	w := &worldfile.World{Name: "bench", Locations: []worldfile.Location{
		{ID: RoomA, Name: "Bench Hall", Description: "A long hall of benches where the load test walks.", Region: "bench",
			Exits: []worldfile.Exit{{Direction: "north", To: RoomB, Back: "south", Description: "A door to the yard."}}},
		{ID: RoomB, Name: "Bench Yard", Description: "A paved yard north of the hall.", Region: "bench"},
	}}
	for i := range players {
		w.Players = append(w.Players, worldfile.Player{ID: PlayerID(i), Name: fmt.Sprintf("Bench %d", i), Location: RoomA})
	}
	return w
}

// PlayerID is the id of bench player i.
func PlayerID(i int) string { return fmt.Sprintf("player:bench-%d", i) }

// LoadWorlds sends the demo world (NPCs and lore for the AI roles) and the bench world through
// the pipeline and waits until every proposal is decided (t must have been started before).
// Proposal ids are deterministic, so a second load on the same data changes nothing.
func LoadWorlds(ctx context.Context, js jetstream.JetStream, t *Tracker, players int) error {
	demo, err := worldfile.DemoWorld()
	if err != nil {
		return err
	}
	routes := route.Default()
	pub := runtime.NewPublisher(js, 0)
	// One world after the other, each waited for: the bench world's players would otherwise
	// compete with the demo's NPCs for the gates, and a world-building proposal whose
	// references are still in flight longer than the invariant gate waits is refused (on a
	// loaded machine the demo's NPCs were, and every dialogue with them then failed).
	for _, w := range []*worldfile.World{demo, BenchWorld(players)} {
		ps, err := worldfile.Proposals(w, routes.For)
		if err != nil {
			return err
		}
		var ids []string
		var batch []*message.Message
		for i := range ps {
			p := &ps[i]
			data, err := json.Marshal(p)
			if err != nil {
				return err
			}
			msg := runtime.NewMessage(events.EmitSubject(events.EmitterWorldLoader), p.ProposalID+"@submit", data)
			msg.Metadata.Set(events.HeaderCorrelationID, p.CorrelationID)
			msg.Metadata.Set(events.HeaderType, p.Kind)
			batch = append(batch, msg)
			ids = append(ids, p.ProposalID)
		}
		// In order: a world's entities come before the exits and players that reference them.
		for len(batch) > 0 {
			n := min(len(batch), 256)
			if err := pub.PublishContext(ctx, "", batch[:n]...); err != nil {
				return err
			}
			batch = batch[n:]
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err = t.WaitProposals(wctx, ids)
		cancel()
		if err != nil {
			return fmt.Errorf("loading world %s: %w", w.Name, err)
		}
		// A refused world proposal leaves the load running on a different world than the
		// one it names: say so rather than measure it.
		for _, id := range ids {
			t.mu.Lock()
			o := *t.byProposal[id]
			t.mu.Unlock()
			if o.Commits == 0 {
				return fmt.Errorf("loading world %s: proposal %s was refused by the %s gate (%s)", w.Name, id, o.Gate, o.Code)
			}
		}
	}
	return nil
}
