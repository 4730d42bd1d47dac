package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/services/graphd/store"
)

// serverMetrics are graphd's Prometheus series, served on /metrics beside /gremlin. Every label
// has a bounded set of values: op (read, write, authentication, eval, close, invalid), status
// (the Gremlin status codes graphd answers with) and source (the configured traversal sources).
type serverMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	snapshot *prometheus.HistogramVec
	sync     *prometheus.HistogramVec
	grouped  *prometheus.HistogramVec
}

// statusClientGone is the status recorded for a request whose client went away while it was
// answered (no Gremlin status reached it).
const statusClientGone = 499

func newServerMetrics(reg prometheus.Registerer, sources func() map[string]*store.Store) (*serverMetrics, error) {
	m := &serverMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "worldgate_graphd_requests_total",
			Help: "Gremlin requests graphd answered, by op (read, write: bytecode traversals; authentication, eval, close, invalid) and response status code."},
			[]string{"op", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "worldgate_graphd_request_duration_seconds",
			Help:    "Time from a Gremlin request's arrival to its last response frame, by op (read, write; a write includes the WAL fsync).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}},
			[]string{"op"}),
		snapshot: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "worldgate_graphd_snapshot_duration_seconds",
			Help:    "Snapshot compactions (the graph written out, a fresh WAL started), by traversal source and outcome (ok, failed). Writes wait for them.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}},
			[]string{"source", "outcome"}),
		sync: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "worldgate_graphd_wal_sync_seconds",
			Help:    "WAL fsyncs, by traversal source: a write is answered after the fsync that covers it.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}},
			[]string{"source"}),
		grouped: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "worldgate_graphd_wal_sync_records",
			Help:    "Write records one WAL fsync made durable, by traversal source (group commit: more than one when writes arrive during an fsync).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64}},
			[]string{"source"}),
	}
	cs := []prometheus.Collector{m.requests, m.duration, m.snapshot, m.sync, m.grouped, &storeCollector{sources: sources}}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *serverMetrics) request(op string, status int32, elapsed time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(op, strconv.Itoa(int(status))).Inc()
	if op == "read" || op == "write" {
		m.duration.WithLabelValues(op).Observe(elapsed.Seconds())
	}
}

// compacted is a store's OnCompact for source.
func (m *serverMetrics) compacted(source string) func(time.Duration, error) {
	return func(d time.Duration, err error) {
		if m == nil {
			return
		}
		outcome := "ok"
		if err != nil {
			outcome = "failed"
		}
		m.snapshot.WithLabelValues(source, outcome).Observe(d.Seconds())
	}
}

// synced is a store's OnSync for source.
func (m *serverMetrics) synced(source string) func(time.Duration, int) {
	if m == nil {
		return nil
	}
	d, n := m.sync.WithLabelValues(source), m.grouped.WithLabelValues(source)
	return func(elapsed time.Duration, records int) {
		d.Observe(elapsed.Seconds())
		n.Observe(float64(records))
	}
}

// storeCollector reports each traversal source's vertex and edge counts and WAL size when
// scraped.
type storeCollector struct {
	sources func() map[string]*store.Store
}

var (
	descVertices = prometheus.NewDesc("worldgate_graphd_vertices", "Vertices in the graph, by traversal source.", []string{"source"}, nil)
	descEdges    = prometheus.NewDesc("worldgate_graphd_edges", "Edges in the graph, by traversal source.", []string{"source"}, nil)
	descWAL      = prometheus.NewDesc("worldgate_graphd_wal_bytes", "Size of the write-ahead log since the last snapshot compaction (which starts past 64 MiB by default), by traversal source.", []string{"source"}, nil)
)

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descVertices
	ch <- descEdges
	ch <- descWAL
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	for name, st := range c.sources() {
		s := st.Stats()
		ch <- prometheus.MustNewConstMetric(descVertices, prometheus.GaugeValue, float64(s.Vertices), name)
		ch <- prometheus.MustNewConstMetric(descEdges, prometheus.GaugeValue, float64(s.Edges), name)
		ch <- prometheus.MustNewConstMetric(descWAL, prometheus.GaugeValue, float64(s.WALBytes), name)
	}
}
