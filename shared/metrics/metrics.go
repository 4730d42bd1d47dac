// Package metrics is Worldgate's one Prometheus registry helper. Every metric is named
// worldgate_<name>; label sets are bounded (never ids as labels).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Namespace prefixes every Worldgate metric.
const Namespace = "worldgate"

// NewRegistry returns a registry with the Go runtime and process collectors registered.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// With returns a factory registering into reg. Workers that run side by side in one process
// (worldgate dev) share a registry, so a collector already registered is reused rather than
// refused: see Counter and friends.
func With(reg prometheus.Registerer) promauto.Factory { return promauto.With(reg) }

// Register registers c, or returns the collector already registered under the same
// descriptor, so that two workers in one process can share a metric.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// DurationBuckets are latency buckets from 1 ms to 30 s.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
