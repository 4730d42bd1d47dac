package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// BenchmarkCommit measures proposals.validated → world.committed on the embedded stack (NATS
// JetStream and graphd in process, the processor at its default MaxInFlight; every proposal of this benchmark has one actor, so they apply one at a time in order):
// commits/s over a backlog of b.N ambience proposals, and p50/p99 of the latency of one
// proposal published on an idle pipeline until its committed event arrives.
func BenchmarkCommit(b *testing.B) {
	e, _, _ := startProcessor(b)
	setup := proposal(events.KindLocationCreated, "bench-loc", obj{"locationId": "loc:bench", "name": "Bench", "description": "Here."})
	publish(b, e.JS, setup, setup.ProposalID)
	natstest.WaitFor(b, 10*time.Second, "setup", func() bool { return committed(b, e) == 1 })

	ps := make([]*events.Proposal, b.N)
	for i := range ps {
		ps[i] = proposal(events.KindAmbience, fmt.Sprintf("bench-%d-%d", b.N, i), obj{"locationId": "loc:bench", "text": "Ash.", "mood": "calm"})
	}
	b.ResetTimer()
	start := time.Now()
	publishAsync(b, e.JS, ps, func(i int) string { return ps[i].ProposalID })
	natstest.WaitFor(b, 10*time.Minute, "backlog committed", func() bool { return committed(b, e) >= uint64(b.N+1) })
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")

	// Latency on an idle pipeline: publish one, wait for its committed event.
	ctx := context.Background()
	cons, err := e.JS.OrderedConsumer(ctx, events.StreamCommitted, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.CommittedSubject("AmbienceGenerated")}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for i := 0; i < 200; i++ {
		p := proposal(events.KindAmbience, fmt.Sprintf("lat-%d-%d", b.N, i), obj{"locationId": "loc:bench", "text": "Ash.", "mood": "calm"})
		t0 := time.Now()
		publish(b, e.JS, p, p.ProposalID)
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			b.Fatal(err)
		}
		var evt events.DomainEvent
		if err := json.Unmarshal(m.Data(), &evt); err != nil || evt.ProposalID != p.ProposalID {
			b.Fatalf("committed %s (%v), want %s", evt.ProposalID, err, p.ProposalID)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
