package runtime

import (
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/worldgate/worldgate/events"
)

// OutcomeMessage is a final decision as a message a handler returns: published on o.Subject()
// (stream OUTCOMES) with Nats-Msg-Id = o.OutcomeID, so a redelivered decision is stored once,
// and with o's headers. o is validated against the outcome schema first (events.Outcome.Encode).
func OutcomeMessage(o *events.Outcome) (*message.Message, error) {
	body, err := o.Encode()
	if err != nil {
		return nil, err
	}
	return EncodedOutcomeMessage(o, body), nil
}

// EncodedOutcomeMessage is OutcomeMessage for an outcome already encoded (body), e.g. by
// events.EncodeCommittedOutcome.
func EncodedOutcomeMessage(o *events.Outcome, body []byte) *message.Message {
	m := NewMessage(o.Subject(), o.OutcomeID, body)
	for k, v := range o.Headers() {
		m.Metadata.Set(k, v)
	}
	return m
}
