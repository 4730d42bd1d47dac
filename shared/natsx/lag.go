package natsx

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/metrics"
)

// LagCollector reports the lag of every durable consumer on some streams, read from JetStream
// when Prometheus scrapes (one consumer-list request per stream), so nothing polls between
// scrapes:
//
//	worldgate_consumer_pending_messages{stream,consumer}      stored, not yet delivered
//	worldgate_consumer_ack_pending_messages{stream,consumer}  delivered, not yet acknowledged
//
// Consumer names are durable names, a fixed set per deployment, so the labels stay bounded.
// Every replica of a worker reports the same figures: aggregate with max, not sum.
type LagCollector struct {
	js      jetstream.JetStream
	streams []string
	log     *slog.Logger
	timeout time.Duration
}

var (
	pendingDesc = prometheus.NewDesc(metrics.Namespace+"_consumer_pending_messages",
		"Messages of the stream the durable consumer has not been delivered yet (JetStream num_pending).",
		[]string{"stream", "consumer"}, nil)
	ackPendingDesc = prometheus.NewDesc(metrics.Namespace+"_consumer_ack_pending_messages",
		"Messages delivered to the durable consumer and not acknowledged yet (JetStream num_ack_pending).",
		[]string{"stream", "consumer"}, nil)
)

// NewLagCollector returns a collector of the lag of the durable consumers on streams. A stream
// that cannot be read at scrape time is logged and left out of that scrape.
func NewLagCollector(js jetstream.JetStream, log *slog.Logger, streams ...string) *LagCollector {
	return &LagCollector{js: js, streams: streams, log: log, timeout: 2 * time.Second}
}

// Describe implements prometheus.Collector.
func (c *LagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- ackPendingDesc
}

// Collect implements prometheus.Collector.
func (c *LagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	for _, name := range c.streams {
		if err := c.collectStream(ctx, name, ch); err != nil {
			c.log.Warn("consumer lag: cannot list the stream's consumers", "stream", name, "err", err)
		}
	}
}

func (c *LagCollector) collectStream(ctx context.Context, name string, ch chan<- prometheus.Metric) error {
	s, err := c.js.Stream(ctx, name)
	if err != nil {
		return err
	}
	lister := s.ListConsumers(ctx)
	for info := range lister.Info() {
		if info.Config.Durable == "" {
			continue // ephemeral and ordered consumers come and go with their clients
		}
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(info.NumPending), name, info.Name)
		ch <- prometheus.MustNewConstMetric(ackPendingDesc, prometheus.GaugeValue, float64(info.NumAckPending), name, info.Name)
	}
	return lister.Err()
}
