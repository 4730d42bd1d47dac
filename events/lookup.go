package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrUnknownEvent is FindEvent's answer when stream WORLD holds no event with the id: it was
// never published (or not yet, or so long ago that the stream no longer keeps it).
var ErrUnknownEvent = errors.New("stream WORLD holds no world event with this id")

// Lookup bounds: an event is looked for among the messages stored from findBefore ahead of the
// time in its id onwards, at most findMaxScan of them.
const (
	findBefore  = 30 * time.Second
	findMaxScan = 5000
)

// StoredEvent is what FindEvent found: the envelope (decoded leniently: only what identifies
// it) and where it is stored.
type StoredEvent struct {
	EventID       string    `json:"eventId"`
	Type          string    `json:"type"`
	CorrelationID string    `json:"correlationId"`
	Actor         Actor     `json:"actor"`
	Sequence      uint64    `json:"-"`
	Stored        time.Time `json:"-"`
}

// FindEvent looks for the world event eventID (an envelope's UUIDv7) in stream WORLD with
// message gets (no consumer, nothing left on the server): it finds the first message stored
// shortly before the time in the id, then reads forward. It returns ErrUnknownEvent only when
// it read every message from there to the end of the stream; any other error means it cannot
// tell (the stream cannot be read, or more than findMaxScan messages were stored since the id
// was made: ask about an old event through its outcomes instead).
func FindEvent(ctx context.Context, js jetstream.JetStream, eventID string) (*StoredEvent, error) {
	u, err := uuid.Parse(eventID)
	if err != nil || u.Version() != 7 {
		return nil, fmt.Errorf("%q is not an envelope's eventId (a UUIDv7)", eventID)
	}
	sec, nsec := u.Time().UnixTime()
	from := time.Unix(sec, nsec).Add(-findBefore)
	st, err := js.Stream(ctx, StreamWorld)
	if err != nil {
		return nil, fmt.Errorf("find event %s: stream %s: %w", eventID, StreamWorld, err)
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return nil, ErrUnknownEvent
	}
	next := func(seq uint64) (*jetstream.RawStreamMsg, error) {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(SubjectWorldAll))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil
		}
		return m, err
	}
	// The first position whose next message was stored at or after from (timestamps grow
	// with the sequence).
	lo, hi := state.FirstSeq, state.LastSeq+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := next(mid)
		if err != nil {
			return nil, fmt.Errorf("find event %s: %w", eventID, err)
		}
		if m != nil && m.Time.Before(from) {
			lo = m.Sequence + 1
		} else {
			hi = mid
		}
	}
	needle := []byte(eventID)
	for seq, n := lo, 0; ; n++ {
		if n == findMaxScan {
			return nil, fmt.Errorf("find event %s: more than %d world events were stored since its id was made; cannot tell whether it is one of them", eventID, findMaxScan)
		}
		m, err := next(seq)
		if err != nil {
			return nil, fmt.Errorf("find event %s: %w", eventID, err)
		}
		if m == nil {
			return nil, ErrUnknownEvent
		}
		if bytes.Contains(m.Data, needle) {
			var e StoredEvent
			if json.Unmarshal(m.Data, &e) == nil && e.EventID == eventID {
				e.Sequence, e.Stored = m.Sequence, m.Time
				return &e, nil
			}
		}
		seq = m.Sequence + 1
	}
}
