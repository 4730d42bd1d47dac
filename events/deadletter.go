package events

// Headers a dead letter carries beyond stage, reason, deliveries, subject, stream and sequence
// (subjects.go). A dead letter holds the original body whole when it fits the DLQ's bound and
// its first bytes otherwise; the original stays on its stream (stream + sequence) until that
// stream's retention removes it.
const (
	// HeaderDLQBodySize is the original body's size in bytes, set when the dead letter holds
	// only an excerpt of it.
	HeaderDLQBodySize = "Worldgate-Dlq-Body-Size"
	// HeaderDLQHeadersDropped counts the original's headers left out to keep the dead letter
	// within the DLQ's bound.
	HeaderDLQHeadersDropped = "Worldgate-Dlq-Headers-Dropped"
)
