package harness

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Ceiling measures the raw JetStream ceiling of one pipeline hop on this machine and server:
// n messages of size bytes are published to a stream, then consumed from a durable pull
// consumer, each republished to a second stream with a message id, and acknowledged once the
// republish is acknowledged — what every worker does per message, with no work in between.
// It returns hops/s over the consume phase. The two streams are deleted afterwards.
func Ceiling(ctx context.Context, js jetstream.JetStream, n, size int) (float64, error) {
	const in, out = "BENCH_CEILING_IN", "BENCH_CEILING_OUT"
	for name, subj := range map[string]string{in: "bench.ceiling.in", out: "bench.ceiling.out"} {
		_ = js.DeleteStream(ctx, name)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subj},
			Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
			return 0, fmt.Errorf("ceiling stream %s: %w", name, err)
		}
		defer func() { _ = js.DeleteStream(context.Background(), name) }()
	}
	payload := filler(size)
	futures := make(chan jetstream.PubAckFuture, 1024)
	errc := awaitAcks(futures)
	for i := range n {
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: "bench.ceiling.in", Data: payload}, jetstream.WithMsgID("in-"+strconv.Itoa(i)))
		if err != nil {
			close(futures)
			return 0, err
		}
		futures <- f
	}
	close(futures)
	if err := <-errc; err != nil {
		return 0, fmt.Errorf("ceiling publish: %w", err)
	}

	cons, err := js.CreateOrUpdateConsumer(ctx, in, jetstream.ConsumerConfig{Durable: "ceiling", AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: 512, AckWait: 30 * time.Second})
	if err != nil {
		return 0, err
	}
	type pending struct {
		m jetstream.Msg
		f jetstream.PubAckFuture
	}
	acks := make(chan pending, 1024)
	var acked, failed atomic.Int64
	var lastFailure atomic.Value // string: why the last hop's publish failed
	done := make(chan struct{})
	go func() {
		for p := range acks {
			select {
			case <-p.f.Ok():
				_ = p.m.Ack()
			case err := <-p.f.Err():
				failed.Add(1)
				lastFailure.Store(err.Error())
				_ = p.m.Nak() // redelivered: the hop is tried again
				continue
			}
			if acked.Add(1) == int64(n) {
				close(done)
			}
		}
	}()
	start := time.Now()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		meta, err := m.Metadata()
		if err != nil {
			return
		}
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: "bench.ceiling.out", Data: m.Data()},
			jetstream.WithMsgID("out-"+strconv.FormatUint(meta.Sequence.Stream, 10)))
		if err != nil {
			_ = m.Nak()
			return
		}
		acks <- pending{m, f}
	}, jetstream.PullMaxMessages(256))
	if err != nil {
		return 0, err
	}
	defer cc.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("ceiling: %d of %d hops after 5 minutes (%d publishes failed, the last: %v)", acked.Load(), n, failed.Load(), lastFailure.Load())
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// filler is size bytes of letters, a message body.
func filler(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// awaitAcks waits for every asynchronous publish sent on futures until it is closed, then
// yields the first that failed (nil if none).
func awaitAcks(futures <-chan jetstream.PubAckFuture) <-chan error {
	errc := make(chan error, 1)
	go func() {
		var first error
		for f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				if first == nil {
					first = err
				}
			}
		}
		errc <- first
	}()
	return errc
}
