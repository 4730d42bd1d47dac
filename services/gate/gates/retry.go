package gates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
)

// Retry tickets keep transient refusals from becoming a way around the gates.
//
// A gate that refuses a proposal transiently (RATE_LIMITED, AUDIT_UNAVAILABLE, an entity not
// committed yet) writes a ticket first: the digest of the proposal it refused, under its own
// name, the proposal id and the attempt, in the bucket natsx.BucketRetries. Once the delay
// has passed, the ai-worker sends the proposal back on proposals.retry.<gate>, and the gate
// takes from that subject only a proposal whose ticket it finds with the same digest. The
// ai-worker's right to publish retries (NATS grants rights per subject) thus brings nothing
// to a gate that has not come to it through every gate before it.
type tickets struct {
	kv jetstream.KeyValue
}

// ticketKey is gate.<hex proposal id>.<attempt>: proposal ids may hold characters KV keys
// may not.
func ticketKey(gate string, p *events.Proposal) string {
	return gate + "." + hex.EncodeToString([]byte(p.ProposalID)) + "." + strconv.Itoa(p.Attempt)
}

// digest covers everything but the route, which the retry rewinds to the refusing gate.
func digest(p *events.Proposal) (string, error) {
	q := *p
	q.Route = events.Route{}
	b, err := json.Marshal(&q)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// issue records that gate refused p transiently and will take it back.
func (t *tickets) issue(ctx context.Context, gate string, p *events.Proposal) error {
	d, err := digest(p)
	if err != nil {
		return err
	}
	_, err = t.kv.Put(ctx, ticketKey(gate, p), []byte(d))
	return err
}

// valid reports whether gate issued a ticket for exactly p. Tickets are not spent: a
// redelivered retry must pass again, and the gates' deterministic message ids keep its
// outcome from being stored twice.
func (t *tickets) valid(ctx context.Context, gate string, p *events.Proposal) (bool, error) {
	e, err := t.kv.Get(ctx, ticketKey(gate, p))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	d, err := digest(p)
	return err == nil && string(e.Value()) == d, err
}
