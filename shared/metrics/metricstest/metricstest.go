// Package metricstest reads metrics back in tests: the sum of a metric's series in a
// registry, as a Prometheus query would add them up.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Sum adds up the values of metric name over its series in g whose labels include every
// name=value pair of match (nil: every series): a counter's, gauge's or untyped metric's value,
// a histogram's or summary's sum of observations (name_sum). A metric with no series yet sums
// to 0; a failing Gather fails the test.
func Sum(t testing.TB, g prometheus.Gatherer, name string, match map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for k, v := range match {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
						break
					}
				}
				if !found {
					continue series
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue() +
				m.GetHistogram().GetSampleSum() + m.GetSummary().GetSampleSum()
		}
	}
	return sum
}
