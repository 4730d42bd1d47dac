package server_test

import (
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/services/event-processor/apply"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
)

// BenchmarkMoveWrites: the event-processor's apply-once writes of players' moves, one request
// per move against one request per batch of moves (apply.Batch), from one client; durable.
// Reports the process's CPU per move (client and graphd share the process) beside the wall
// time, since a request mostly waits for its fsync.
func BenchmarkMoveWrites(b *testing.B) {
	for _, c := range []struct{ clients, size int }{{1, 1}, {8, 1}, {1, 4}, {1, 16}, {2, 8}} {
		clients, size := c.clients, c.size
		b.Run(strconv.Itoa(clients)+"-clients-batch-"+strconv.Itoa(size), func(b *testing.B) {
			srv := graphdtest.Start(b, graphdtest.WithoutAuth())
			g := writer(b, srv)
			const players = 1000
			at := seedPlayers(b, g, players)
			cpu0 := cpuTime()
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					write(b, g, at, c, clients, size)
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/move")
		})
	}
}

// write applies client's share of b.N moves (the players n with n % clients == client), size
// moves per request.
func write(b *testing.B, g *gremlingo.GraphTraversalSource, at []string, client, clients, size int) {
	players := len(at)
	for i := client; i < b.N; i += size * clients {
		items := make([]apply.Item, 0, size)
		for j := i; j < i+size*clients && j < b.N; j += clients {
			it, err := move(at, j%players, j)
			if err != nil {
				b.Error(err)
				return
			}
			items = append(items, it)
		}
		res, err := apply.Batch(g, items).ToList()
		if err != nil {
			b.Error(err)
			return
		}
		vals := make([]any, len(res))
		for j, r := range res {
			vals[j] = r.GetInterface()
		}
		ds, err := apply.ReadDecisions(vals, items)
		if err != nil {
			b.Error(err)
			return
		}
		for _, d := range ds {
			if !d.Applied {
				b.Errorf("write: %+v", d)
				return
			}
		}
	}
}

// cpuTime is the process's user and system CPU so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMoveReads: the invariant gate's read of a move's facts (the player and both
// locations, their exits and places), one request per move against one request for the
// facts of several moves.
func BenchmarkMoveReads(b *testing.B) {
	srv := graphdtest.Start(b, graphdtest.WithoutAuth())
	g := writer(b, srv)
	const players = 1000
	seedPlayers(b, g, players)
	for _, size := range []int{1, 4, 16} {
		b.Run("batch-"+strconv.Itoa(size), func(b *testing.B) {
			cpu0 := cpuTime()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += size {
				ids := []any{"loc:a", "loc:b"}
				for j := i; j < i+size && j < b.N; j++ {
					ids = append(ids, "player:"+strconv.Itoa(j%players), "evt:bench-"+strconv.Itoa(j))
				}
				rows, err := g.V(ids...).Project("id", "exits", "at").
					By(T.Id).
					By(__.OutE("exit").Project("direction", "to").By("direction").By(__.InV().Id()).Fold()).
					By(__.Out("at").Id().Fold()).ToList()
				if err != nil || len(rows) < 3 {
					b.Fatalf("read: %v %d", err, len(rows))
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/move")
		})
	}
}
