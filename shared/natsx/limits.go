package natsx

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
)

// The limits every message of the topology must respect, and that must agree with each
// other: whatever a stream accepts can always be dead-lettered, and no consumer redelivers a
// message for ever. CheckLimits and CheckConsumer test a topology and a consumer against them.
const (
	// DeadLetterBodyMax bounds the body a dead letter carries: the whole body when it fits
	// (every valid envelope and proposal does), else its first DeadLetterBodyMax bytes.
	DeadLetterBodyMax = 64 << 10
	// DeadLetterHeaderMax bounds all of a dead letter's headers together: the reason, stage,
	// stream, sequence and subject of the original, and as many of its own headers as fit.
	DeadLetterHeaderMax = 16 << 10
	// DeadLetterMax is the largest dead letter the runtime publishes.
	DeadLetterMax = DeadLetterBodyMax + DeadLetterHeaderMax

	// DeadLetterAttempts is how many deliveries past its handler's limit (the runtime's
	// MaxDeliver) the server grants a message: a dead letter that could not be published is
	// tried again on each, and on the last the message is terminated (Term), counted in
	// worldgate_terminated_total and alerted on.
	DeadLetterAttempts = 3
	// MaxDeliverBound is the largest delivery limit a consumer may have on the server.
	MaxDeliverBound = 10000
)

// CheckLimits reports every way t's limits disagree: a stream accepting larger messages than
// the server's max payload, a DLQ that cannot take the largest dead letter, a duplicate window
// longer than a stream keeps messages or differing between streams, a stream or bucket
// without an age and a size limit. maxPayload is the server's (and clients') largest message.
func CheckLimits(t Topology, maxPayload int32) error {
	var errs []error
	var dlq *jetstream.StreamConfig
	for i, s := range t.Streams {
		if s.Name == events.StreamDLQ {
			dlq = &t.Streams[i]
		}
		if s.MaxMsgSize <= 0 {
			errs = append(errs, fmt.Errorf("stream %s: no message size limit (MaxMsgSize %d)", s.Name, s.MaxMsgSize))
		} else if s.MaxMsgSize > maxPayload {
			errs = append(errs, fmt.Errorf("stream %s accepts %d-byte messages, more than the server's max payload %d", s.Name, s.MaxMsgSize, maxPayload))
		}
		if s.MaxAge > 0 && s.Duplicates > s.MaxAge {
			errs = append(errs, fmt.Errorf("stream %s: duplicate window %v is longer than it keeps messages (%v)", s.Name, s.Duplicates, s.MaxAge))
		}
		if s.Duplicates <= 0 {
			errs = append(errs, fmt.Errorf("stream %s: no duplicate window", s.Name))
		}
		if s.MaxAge <= 0 || s.MaxBytes <= 0 {
			errs = append(errs, fmt.Errorf("stream %s: unbounded (MaxAge %v, MaxBytes %d): every stream needs an age and a size limit", s.Name, s.MaxAge, s.MaxBytes))
		}
	}
	// One duplicate window for every stream, shortened only where a stream keeps its messages
	// for less time than that.
	var window time.Duration
	for _, s := range t.Streams {
		window = max(window, s.Duplicates)
	}
	for _, s := range t.Streams {
		if want := min(window, s.MaxAge); s.Duplicates != want && s.MaxAge > 0 {
			errs = append(errs, fmt.Errorf("stream %s: duplicate window %v, want %v like the other streams", s.Name, s.Duplicates, want))
		}
	}
	if dlq == nil {
		errs = append(errs, errors.New("no DLQ stream"))
	} else if dlq.MaxMsgSize < DeadLetterMax {
		errs = append(errs, fmt.Errorf("DLQ accepts %d bytes but a dead letter may take %d", dlq.MaxMsgSize, DeadLetterMax))
	}
	for _, b := range t.Buckets {
		if (b.TTL <= 0 && b.Bucket != BucketBudget) || b.MaxBytes <= 0 {
			errs = append(errs, fmt.Errorf("bucket %s: unbounded (TTL %v, MaxBytes %d): every bucket needs an age and a size limit", b.Bucket, b.TTL, b.MaxBytes))
		}
		if b.MaxValueSize > maxPayload {
			errs = append(errs, fmt.Errorf("bucket %s accepts %d-byte values, more than the server's max payload %d", b.Bucket, b.MaxValueSize, maxPayload))
		}
	}
	return errors.Join(errs...)
}

// CheckConsumer reports a consumer configuration that could hold a message for ever: no
// bounded delivery limit, no room between the handler's limit and the server's for the dead
// letter, no ack wait or in-flight bound.
func CheckConsumer(c jetstream.ConsumerConfig) error {
	var errs []error
	name := c.Durable
	if name == "" {
		name = c.Name
	}
	if c.MaxDeliver <= DeadLetterAttempts || c.MaxDeliver > MaxDeliverBound {
		errs = append(errs, fmt.Errorf("consumer %s: MaxDeliver %d, want more than %d (the dead letter's attempts) and at most %d", name, c.MaxDeliver, DeadLetterAttempts, MaxDeliverBound))
	}
	if c.AckPolicy != jetstream.AckExplicitPolicy {
		errs = append(errs, fmt.Errorf("consumer %s: ack policy %v, want explicit", name, c.AckPolicy))
	}
	if c.AckWait <= 0 || c.AckWait > 10*time.Minute {
		errs = append(errs, fmt.Errorf("consumer %s: ack wait %v", name, c.AckWait))
	}
	if c.MaxAckPending <= 0 {
		errs = append(errs, fmt.Errorf("consumer %s: no bound on messages in flight", name))
	}
	return errors.Join(errs...)
}
