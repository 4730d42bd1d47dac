package natsx_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

func TestLagCollectorReportsPendingAndUnacknowledgedPerDurable(t *testing.T) {
	e := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		if _, err := events.Publish(ctx, e.JS, envelope(t)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := e.JS.CreateOrUpdateConsumer(ctx, events.StreamWorld, jetstream.ConsumerConfig{Durable: "ambience", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	// An ordered (ephemeral) consumer, like the dev summary's, is not a worker: not reported.
	if _, err := e.JS.OrderedConsumer(ctx, events.StreamWorld, jetstream.OrderedConsumerConfig{}); err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() { // delivered, deliberately not acknowledged
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(natsx.NewLagCollector(e.JS, logx.Discard(), events.StreamWorld, events.StreamProposals))
	want := `
# HELP worldgate_consumer_ack_pending_messages Messages delivered to the durable consumer and not acknowledged yet (JetStream num_ack_pending).
# TYPE worldgate_consumer_ack_pending_messages gauge
worldgate_consumer_ack_pending_messages{consumer="ambience",stream="WORLD"} 1
# HELP worldgate_consumer_pending_messages Messages of the stream the durable consumer has not been delivered yet (JetStream num_pending).
# TYPE worldgate_consumer_pending_messages gauge
worldgate_consumer_pending_messages{consumer="ambience",stream="WORLD"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
