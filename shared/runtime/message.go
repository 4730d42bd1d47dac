package runtime

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/worldgate/worldgate/events"
)

// Metadata keys the runtime sets on consumed messages and reads on produced ones. Keys that
// begin with "_" stay inside the process; every other key travels as a NATS header.
const (
	MetaSubject    = "_subject"    // consumed: where it arrived; produced: where to publish
	MetaStream     = "_stream"     // consumed: stream name
	MetaSequence   = "_seq"        // consumed: stream sequence
	MetaDeliveries = "_deliveries" // consumed: how many times JetStream has delivered it
	MetaMaxDeliver = "_maxdeliver" // consumed: the consumer's delivery limit
	// MetaAfterPrevious, set on a produced message (to any value), publishes it only once
	// JetStream has stored every message before it in the handler's output (After).
	MetaAfterPrevious = "_after"

	// metaTerminate, set by the dead-letter layer on a message it gives up on, makes the
	// subscriber terminate the message (with this reason) instead of handing it back.
	metaTerminate = "_terminate"
)

// NewMessage builds a message to publish to subject with a deterministic id: JetStream drops a
// second message with the same id inside the stream's duplicate window, so a handler that runs
// twice for one input (after a crash or redelivery) publishes once. id should be derived from
// the input (e.g. proposal id + stage), never random.
func NewMessage(subject, id string, payload []byte) *message.Message {
	m := message.NewMessage(id, payload)
	m.Metadata.Set(MetaSubject, subject)
	return m
}

// After marks m to be published only once every message before it in the same output is
// stored: e.g. a decision's outcome after the domain event it announces, which lives in
// another stream (with, in a cluster, another leader), so that whoever sees the outcome finds
// the event. Returns m.
func After(m *message.Message) *message.Message {
	m.Metadata.Set(MetaAfterPrevious, "1")
	return m
}

// Deliveries is how many times JetStream has delivered msg (1 on the first delivery).
func Deliveries(msg *message.Message) int {
	n, _ := strconv.Atoi(msg.Metadata.Get(MetaDeliveries))
	return n
}

// CorrelationID is the message's correlation id header.
func CorrelationID(msg *message.Message) string {
	return msg.Metadata.Get(events.HeaderCorrelationID)
}

// PermanentError marks a failure that retrying cannot fix (a malformed message, a decoding
// error): the runtime dead-letters the message at once instead of redelivering it.
type PermanentError struct {
	Err error
	// Also are messages published before the dead letter (e.g. the refused Outcome a game
	// awaits): the message is dead-lettered only once they are published.
	Also []*message.Message
}

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so that the message is dead-lettered without retries.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Permanentf is Permanent(fmt.Errorf(format, args...)).
func Permanentf(format string, args ...any) error { return Permanent(fmt.Errorf(format, args...)) }

// PermanentWith is Permanent(err), publishing also before the dead letter: a final answer for
// whoever waits on the dead-lettered message (published with their own subjects and message
// ids, so a redelivery stores them once).
func PermanentWith(err error, also ...*message.Message) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err, Also: also}
}

// LaterError hands a message back to be decided again after its backoff because something it
// depends on is not there yet (the previous move of a player has not committed): not a failure.
// It is logged at Info and counted as "later", not "error"; the in-process retries skip it.
type LaterError struct{ Err error }

func (e *LaterError) Error() string { return e.Err.Error() }
func (e *LaterError) Unwrap() error { return e.Err }

// Later wraps err so that the message is handed back for a later delivery without counting as
// a failure. Its last delivery is dead-lettered like any failure's: a handler decides on its
// last delivery (see Deliveries and MaxDeliver) rather than wait again.
func Later(err error) error {
	if err == nil {
		return nil
	}
	return &LaterError{Err: err}
}

// IsLater reports whether err (or an error it wraps) is a Later one.
func IsLater(err error) bool {
	var l *LaterError
	return errors.As(err, &l)
}

// IsPermanent reports whether err (or an error it wraps) is permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}
