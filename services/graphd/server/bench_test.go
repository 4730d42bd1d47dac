package server_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
)

// BenchmarkMergeVRoundTrip: one durable mergeV (fsync'ed) per round trip
// through gremlin-go, sequentially from one client.
func BenchmarkMergeVRoundTrip(b *testing.B) {
	srv := graphdtest.Start(b, graphdtest.WithoutAuth())
	g := writer(b, srv)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		err := <-g.MergeV(map[any]any{T.Id: fmt.Sprintf("npc:%d", i%1000), T.Label: "NPC"}).
			Option(gremlingo.Merge.OnMatch, map[any]any{"n": int64(i)}).Iterate()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "roundtrips/s")
}

// BenchmarkHasLabelKeyValue: V().has(label, key, value) on 100,000 vertices.
func BenchmarkHasLabelKeyValue(b *testing.B) {
	srv := graphdtest.Start(b, graphdtest.WithoutAuth(), graphdtest.InMemory())
	g := writer(b, srv)
	loadBulkV(b, g, 100_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := g.V().Has("Person", "name", "name-"+strconv.Itoa(i%100_000)).Id().ToList()
		if err != nil || len(res) != 1 {
			b.Fatalf("%v %v", res, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
}

func loadBulkV(b testing.TB, g *gremlingo.GraphTraversalSource, n int) {
	const batch = 2000
	for i := 0; i < n; i += batch {
		maps := make([]any, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			maps = append(maps, map[any]any{T.Id: "p" + strconv.Itoa(j), T.Label: "Person", "name": "name-" + strconv.Itoa(j)})
		}
		mustIterate(b, g.Inject(maps).Unfold().MergeV())
	}
}

// BenchmarkLoad100kV300kE: durable load of 100,000 vertices and 300,000 edges
// through gremlin-go (mergeV / mergeE batches of 2,000 per request).
func BenchmarkLoad100kV300kE(b *testing.B) {
	for i := 0; i < b.N; i++ {
		srv := graphdtest.Start(b, graphdtest.WithoutAuth())
		g := writer(b, srv)
		start := time.Now()
		const n, m, batch = 100_000, 300_000, 2000
		loadBulkV(b, g, n)
		for i := 0; i < m; i += batch {
			maps := make([]any, 0, batch)
			for j := i; j < min(i+batch, m); j++ {
				maps = append(maps, map[any]any{gremlingo.Direction.Out: "p" + strconv.Itoa(j%n), gremlingo.Direction.In: "p" + strconv.Itoa((j*7+1)%n), T.Label: "knows", "w": int64(j)})
			}
			mustIterate(b, g.Inject(maps).Unfold().MergeE())
		}
		el := time.Since(start)
		if got := one(b, g.E().Count()); got != strconv.Itoa(m) {
			b.Fatalf("edges %s", got)
		}
		b.ReportMetric(el.Seconds(), "load-s")
		b.ReportMetric(peakRSSMiB(), "peakRSS-MiB")
	}
}

func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}
