package main

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/metrics"
)

// registry is the dev stack's one Prometheus registry, served at the admin port. It also
// remembers what was registered on it, so that the metric catalog (docs/metrics.md) and the
// dashboard test see every metric the workers export, including those with no series yet
// (dead letters in a run that had none).
type registry struct {
	*prometheus.Registry
	mu         sync.Mutex
	collectors []prometheus.Collector
}

func newRegistry() *registry { return &registry{Registry: metrics.NewRegistry()} }

// Register implements prometheus.Registerer.
func (r *registry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister implements prometheus.Registerer.
func (r *registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister implements prometheus.Registerer.
func (r *registry) Unregister(c prometheus.Collector) bool {
	if !r.Registry.Unregister(c) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, have := range r.collectors {
		if have == c {
			r.collectors = append(r.collectors[:i], r.collectors[i+1:]...)
			break
		}
	}
	return true
}

// registered returns what the workers registered, in registration order.
func (r *registry) registered() []prometheus.Collector {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]prometheus.Collector(nil), r.collectors...)
}
