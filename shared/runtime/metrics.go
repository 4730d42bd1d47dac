package runtime

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/metrics"
)

type handlerMetrics struct {
	handled     *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	deadLetters *prometheus.CounterVec
	terminated  *prometheus.CounterVec
	partitions  *prometheus.GaugeVec
}

func newHandlerMetrics(reg prometheus.Registerer) *handlerMetrics {
	return &handlerMetrics{
		handled: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "handler_messages_total",
			Help: "Messages a handler finished, by outcome (ok; error: handed back for redelivery; later: handed back to be decided again once what it depends on is there).",
		}, []string{"handler", "outcome"})),
		latency: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Name: "handler_latency_seconds",
			Help: "Time a handler took per message, publishing included.", Buckets: metrics.DurationBuckets,
		}, []string{"handler"})),
		deadLetters: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "deadletter_total",
			Help: "Messages put on deadletter.<stage>, by reason (permanent: retrying cannot help; exhausted: delivery limit reached).",
		}, []string{"stage", "reason"})),
		terminated: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "terminated_total",
			Help: "Messages terminated (Term) without a dead letter: the dead letter could not be published on any of the deliveries left for it. Each is also logged with its stream, sequence and subject.",
		}, []string{"stage"})),
		partitions: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Name: "handler_partitions_owned",
			Help: "Partitions of a partitioned consumer this replica consumes now (the replicas share them; see docs/deploy.md).",
		}, []string{"handler"})),
	}
}
