package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/graphd/server"
)

// scrape reads graphd's /metrics (served beside /gremlin) and returns each sample of the
// worldgate_graphd_ families as "name{labels}" → value.
func scrape(t *testing.T, srv *server.Server) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %s %s", resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "worldgate_graphd_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestMetricsMove drives graphd through gremlin-go and checks that every series of its
// /metrics exists and moves: requests by op and status, latency, vertex and edge counts, WAL
// size and snapshot compactions (a small -compact-bytes makes them happen).
func TestMetricsMove(t *testing.T) {
	srv := graphdtest.Start(t, graphdtest.WithDataDir(t.TempDir()), graphdtest.WithConfig(func(c *server.Config) { c.CompactBytes = 64 << 10 }))
	before := scrape(t, srv)
	if before["worldgate_graphd_vertices{source=g}"] != 0 || before["worldgate_graphd_edges{source=g}"] != 0 {
		t.Fatalf("an empty graph reports %v vertices and %v edges", before["worldgate_graphd_vertices{source=g}"], before["worldgate_graphd_edges{source=g}"])
	}
	g := writer(t, srv)
	const n = 300
	for i := range n {
		mustIterate(t, g.AddV("room").Property(gremlingo.T.Id, fmt.Sprintf("r%d", i)).Property("text", strings.Repeat("x", 400)))
	}
	for i := 1; i < n; i++ {
		mustIterate(t, g.V(fmt.Sprintf("r%d", i-1)).AddE("exit").To(gremlingo.T__.V(fmt.Sprintf("r%d", i))))
	}
	if got := toList(t, g.V().Count()); got[0] != int64(n) {
		t.Fatalf("count %v", got)
	}
	// A read-only user's write is refused: a status other than 200.
	ro, _ := connect(t, srv, graphdtest.ReaderUser, graphdtest.ReaderPassword)
	if err := <-ro.AddV("room").Iterate(); err == nil {
		t.Fatal("the reader added a vertex")
	}

	moving := []string{
		"worldgate_graphd_requests_total{op=write,status=204}", // Iterate: no results
		"worldgate_graphd_requests_total{op=read,status=200}",
		"worldgate_graphd_requests_total{op=write,status=403}",
		"worldgate_graphd_requests_total{op=authentication,status=200}",
		"worldgate_graphd_request_duration_seconds{op=write}",
		"worldgate_graphd_request_duration_seconds{op=read}",
		"worldgate_graphd_snapshot_duration_seconds{outcome=ok,source=g}",
		"worldgate_graphd_wal_sync_seconds{source=g}",
		"worldgate_graphd_wal_sync_records{source=g}",
	}
	allMoved := func(after map[string]float64) bool {
		for _, key := range moving {
			if after[key] <= before[key] {
				return false
			}
		}
		return true
	}
	// The server counts a request once it has answered it, so the client may see the answer
	// before the count (on a loaded machine, long before): wait until every series moved.
	after := scrape(t, srv)
	for deadline := time.Now().Add(5 * time.Second); !allMoved(after) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		after = scrape(t, srv)
	}
	for key, want := range map[string]float64{
		"worldgate_graphd_vertices{source=g}": n,
		"worldgate_graphd_edges{source=g}":    n - 1,
	} {
		if after[key] != want {
			t.Errorf("%s = %v, want %v", key, after[key], want)
		}
	}
	for _, key := range moving {
		if after[key] <= before[key] {
			t.Errorf("%s did not move: %v → %v", key, before[key], after[key])
		}
	}
	if w := after["worldgate_graphd_requests_total{op=write,status=204}"]; w < 2*n-1 {
		t.Errorf("%v writes counted, want ≥ %d", w, 2*n-1)
	}
	// One client writing one request at a time: every write needs an fsync of its own (a
	// snapshot compaction makes the ones before it durable without one).
	if syncs := after["worldgate_graphd_wal_sync_seconds{source=g}"]; syncs < n || syncs > 2*n {
		t.Errorf("%v WAL fsyncs for %d writes one after the other", syncs, 2*n-1)
	}
	if _, ok := after["worldgate_graphd_wal_bytes{source=g}"]; !ok {
		t.Error("no worldgate_graphd_wal_bytes")
	}
	mustIterate(t, g.AddV("room").Property("text", strings.Repeat("y", 1000)))
	// The write grows the WAL, or (past CompactBytes) a compaction starts a fresh one.
	if w := scrape(t, srv)["worldgate_graphd_wal_bytes{source=g}"]; w == after["worldgate_graphd_wal_bytes{source=g}"] {
		t.Errorf("the WAL size did not change with a write: %v", w)
	}
}
