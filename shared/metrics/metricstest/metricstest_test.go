package metricstest_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/metrics/metricstest"
)

func TestSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "calls_total"}, []string{"tool", "outcome"})
	depth := prometheus.NewGauge(prometheus.GaugeOpts{Name: "depth"})
	sizes := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sizes"})
	reg.MustRegister(calls, depth, sizes)
	sizes.Observe(2)
	sizes.Observe(4)
	calls.WithLabelValues("list-exits", "ok").Add(3)
	calls.WithLabelValues("list-exits", "error").Add(1)
	calls.WithLabelValues("describe", "ok").Add(5)
	depth.Set(7)
	for _, c := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"calls_total", nil, 9},
		{"calls_total", map[string]string{"tool": "list-exits"}, 4},
		{"calls_total", map[string]string{"tool": "list-exits", "outcome": "ok"}, 3},
		{"calls_total", map[string]string{"outcome": "list-exits"}, 0},
		{"depth", nil, 7},
		{"sizes", nil, 6},
		{"absent_total", nil, 0},
	} {
		if got := metricstest.Sum(t, reg, c.name, c.match); got != c.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", c.name, c.match, got, c.want)
		}
	}
}
