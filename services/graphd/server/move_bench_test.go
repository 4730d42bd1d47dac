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
		player, from, to := "player:"+strconv.Itoa(n), at[n], other(at[n])
		rows, err := g.V(player, from, to).Project("id", "exits", "at").
			By(T.Id).
			By(__.OutE("exit").Project("direction", "to").By("direction").By(__.InV().Id()).Fold()).
			By(__.Out("at").Id().Fold()).ToList()
		if err != nil || len(rows) != 3 {
			b.Fatalf("read: %v %d", err, len(rows))
		}
		it, err := move(at, n, i)
		if err != nil {
			b.Fatal(err)
		}
		res, err := it.Command.Traversal(g, it.Meta).ToList()
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

// other is the location a player at loc moves to.
func other(loc string) string {
	if loc == "loc:b" {
		return "loc:a"
	}
	return "loc:b"
}

// move is the apply item of move i: player n from where at says it is to the other location
// (which at then records).
func move(at []string, n, i int) (apply.Item, error) {
	player, from, to := "player:"+strconv.Itoa(n), at[n], other(at[n])
	dir := "north"
	if from == "loc:b" {
		dir = "south"
	}
	id := "bench-" + strconv.Itoa(i)
	p := &events.Proposal{ProposalID: id, Kind: events.KindPlayerMoved, CorrelationID: id,
		Payload: []byte(`{"playerId":"` + player + `","fromLocationId":"` + from + `","toLocationId":"` + to + `","direction":"` + dir + `"}`)}
	cmds, err := apply.Build(p)
	if err != nil {
		return apply.Item{}, err
	}
	at[n] = to
	return apply.Item{Command: cmds[0], Meta: apply.Meta{ProposalID: id, CorrelationID: id,
		CommittedUTC: time.Now().UTC().Format(time.RFC3339Nano), Source: "PROPOSALS:" + strconv.Itoa(i)}}, nil
}
