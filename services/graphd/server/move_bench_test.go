package server_test

import (
	"strconv"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/event-processor/apply"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
)

// BenchmarkMoveRoundTrip: what a player's move asks of graphd, one after the other from
// one client: the invariant gate's read of the player and both locations, then the
// event-processor's apply-once write (durable).
func BenchmarkMoveRoundTrip(b *testing.B) {
	srv := graphdtest.Start(b, graphdtest.WithoutAuth())
	g := writer(b, srv)
	const players = 1000
	at := seedPlayers(b, g, players)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := i % players
		player, from := "player:"+strconv.Itoa(n), at[n]
		to, dir := "loc:b", "north"
		if from == "loc:b" {
			to, dir = "loc:a", "south"
		}
		rows, err := g.V(player, from, to).Project("id", "exits", "at").
			By(T.Id).
			By(__.OutE("exit").Project("direction", "to").By("direction").By(__.InV().Id()).Fold()).
			By(__.Out("at").Id().Fold()).ToList()
		if err != nil || len(rows) != 3 {
			b.Fatalf("read: %v %d", err, len(rows))
		}
		id := "bench-" + strconv.Itoa(i)
		p := &events.Proposal{ProposalID: id, Kind: events.KindPlayerMoved, CorrelationID: id,
			Payload: []byte(`{"playerId":"` + player + `","fromLocationId":"` + from + `","toLocationId":"` + to + `","direction":"` + dir + `"}`)}
		cmds, err := apply.Build(p)
		if err != nil {
			b.Fatal(err)
		}
		meta := apply.Meta{ProposalID: id, CorrelationID: id, CommittedUTC: time.Now().UTC().Format(time.RFC3339Nano), Source: "PROPOSALS:" + strconv.Itoa(i)}
		res, err := cmds[0].Traversal(g, meta).ToList()
		if err != nil {
			b.Fatal(err)
		}
		vals := make([]any, len(res))
		for j, r := range res {
			vals[j] = r.GetInterface()
		}
		d, err := apply.ReadDecision(vals)
		if err != nil || !d.Applied {
			b.Fatalf("write: %+v %v", d, err)
		}
		at[n] = to
	}
}

var _ = gremlingo.Merge

// seedPlayers writes two locations with an exit each way (loc:a north to loc:b, loc:b south to
// loc:a) and players player:0 … at loc:a, and returns where each player is.
func seedPlayers(b *testing.B, g *gremlingo.GraphTraversalSource, players int) []string {
	mustIterate(b, g.AddV("Location").Property(T.Id, "loc:a").AddV("Location").Property(T.Id, "loc:b"))
	mustIterate(b, g.V("loc:a").AddE("exit").To(__.V("loc:b")).Property("direction", "north"))
	mustIterate(b, g.V("loc:b").AddE("exit").To(__.V("loc:a")).Property("direction", "south"))
	for i := 0; i < players; i++ {
		mustIterate(b, g.AddV("Player").Property(T.Id, "player:"+strconv.Itoa(i)).Property("version", int64(0)).AddE("at").To(__.V("loc:a")))
	}
	at := make([]string, players)
	for i := range at {
		at[i] = "loc:a"
	}
	return at
}
