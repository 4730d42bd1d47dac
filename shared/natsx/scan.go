package natsx

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Scan reads stream s with an ordered consumer configured by cfg (where to start, headers
// only) up to stream sequence last, handing each message and its metadata to fn until fn
// returns true; it returns how many it handed over. It ends at last, or earlier when the
// stream has nothing more (messages removed by limits): it never waits for new messages.
func Scan(ctx context.Context, s jetstream.Stream, cfg jetstream.OrderedConsumerConfig, last uint64,
	fn func(m jetstream.Msg, meta *jetstream.MsgMetadata) (stop bool)) (int, error) {
	c, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		// No wait: the server sends what the window holds now and ends the request, instead
		// of holding it open for a full batch.
		batch, err := c.FetchNoWait(1024)
		if err != nil {
			return n, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			if meta.Sequence.Stream > last {
				return n, nil
			}
			n++
			if fn(m, meta) || meta.Sequence.Stream == last {
				return n, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return n, err
		}
		if got == 0 {
			return n, nil
		}
	}
}
