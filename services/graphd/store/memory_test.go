package store

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/worldgate/worldgate/services/graphd/graph"
)

// BenchmarkMemoryPerElement measures graphd's heap per element, in the shapes Worldgate writes:
// a Player vertex (name, version, locationId, updatedUtc), an AppliedEvent marker (the
// apply-once marker: type, proposalId, correlationId, committedUtc, source) and an edge with
// one property. Each figure is the live heap after GC, divided by the elements added.
//
//	cd services && go test -run X -bench MemoryPerElement -benchtime 1x ./graphd/store
func BenchmarkMemoryPerElement(b *testing.B) {
	const n = 50_000
	for range b.N {
		s, err := Open("", Options{})
		if err != nil {
			b.Fatal(err)
		}
		heap := func() float64 {
			runtime.GC()
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return float64(m.HeapAlloc)
		}
		write := func(fn func(g *graph.Graph, tx *graph.Tx, i int) error) {
			for lo := 0; lo < n; lo += 1000 {
				err := s.Write(context.Background(), func(g *graph.Graph, tx *graph.Tx) error {
					for i := lo; i < lo+1000; i++ {
						if err := fn(g, tx, i); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		now := time.Now().UTC()
		prop := func(g *graph.Graph, tx *graph.Tx, v *graph.Vertex, kv ...any) error {
			for j := 0; j < len(kv); j += 2 {
				if _, err := g.SetVertexProperty(tx, v, graph.Single, kv[j].(string), kv[j+1]); err != nil {
					return err
				}
			}
			return nil
		}
		h0 := heap()
		write(func(g *graph.Graph, tx *graph.Tx, i int) error {
			v, err := g.AddVertex(tx, fmt.Sprintf("player:bench-%d", i), "Player")
			if err != nil {
				return err
			}
			return prop(g, tx, v, "name", fmt.Sprintf("Player %d", i), "version", int64(i), "locationId", "loc:bench-hall", "updatedUtc", now.Format(time.RFC3339Nano))
		})
		h1 := heap()
		write(func(g *graph.Graph, tx *graph.Tx, i int) error {
			out, in := g.Vertex(fmt.Sprintf("player:bench-%d", i)), g.Vertex(fmt.Sprintf("player:bench-%d", (i+1)%n))
			e, err := g.AddEdge(tx, nil, "knows", out, in)
			if err != nil {
				return err
			}
			return g.SetEdgeProperty(tx, e, "since", now.Format(time.RFC3339Nano))
		})
		h2 := heap()
		write(func(g *graph.Graph, tx *graph.Tx, i int) error {
			id := fmt.Sprintf("applied:%08x-1111-5222-8333-%012x", i, i)
			v, err := g.AddVertex(tx, id, "AppliedEvent")
			if err != nil {
				return err
			}
			return prop(g, tx, v, "type", "Player.Moved", "proposalId", fmt.Sprintf("%08x-aaaa-5bbb-8ccc-%012x", i, i),
				"correlationId", fmt.Sprintf("soak-1764000000000000000-%d", i), "committedUtc", now.Format(time.RFC3339Nano), "source", "event-processor")
		})
		h3 := heap()
		if s.g.VertexCount() != 2*n || s.g.EdgeCount() != n {
			b.Fatalf("%d vertices, %d edges", s.g.VertexCount(), s.g.EdgeCount())
		}
		b.ReportMetric((h1-h0)/n, "B/player-vertex")
		b.ReportMetric((h2-h1)/n, "B/edge")
		b.ReportMetric((h3-h2)/n, "B/marker-vertex")
		runtime.KeepAlive(s)
	}
}
