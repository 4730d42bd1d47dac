package stack

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/metrics"
)

// Registry is the stack's one Prometheus registry, served at the admin port. It also
// remembers what was registered on it, so that the metric catalog (docs/metrics.md) and the
// dashboard test see every metric the workers export, including those with no series yet
// (dead letters in a run that had none).
type Registry struct {
	*prometheus.Registry
	mu         sync.Mutex
	collectors []prometheus.Collector
}

// NewRegistry returns an registry with the Go runtime and process collectors registered.
func NewRegistry() *Registry { return &Registry{Registry: metrics.NewRegistry()} }

// Register implements prometheus.Registerer.
func (r *Registry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister implements prometheus.Registerer.
func (r *Registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister implements prometheus.Registerer.
func (r *Registry) Unregister(c prometheus.Collector) bool {
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

// Registered returns what the workers registered, in registration order.
func (r *Registry) Registered() []prometheus.Collector {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]prometheus.Collector(nil), r.collectors...)
}
