package events

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publish validates env exactly as Worldgate will read it and publishes it to Subject(env.Type)
// with Nats-Msg-Id = env.IdempotencyKey, waiting for JetStream's acknowledgement. A republished
// envelope with the same key inside the WORLD stream's duplicate window is stored once; the
// returned ack then has Duplicate set.
//
// opts add headers: WithHeaders carries, for example, the W3C trace context of the publisher's
// span (traceparent), so Worldgate's spans join the publisher's trace.
func Publish(ctx context.Context, js jetstream.JetStream, env *Envelope, opts ...PublishOption) (*jetstream.PubAck, error) {
	data, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	if _, err := DecodeEnvelope(data); err != nil {
		return nil, err
	}
	return PublishRaw(ctx, js, env.Type, env.IdempotencyKey, env.CorrelationID, data, opts...)
}

// PublishOption adjusts the message Publish and PublishRaw send.
type PublishOption func(*nats.Msg)

// WithHeaders adds h's headers to the message. Worldgate's own headers (correlation id, type)
// and Nats-Msg-Id are set from the envelope and cannot be overridden.
func WithHeaders(h nats.Header) PublishOption {
	return func(m *nats.Msg) {
		for k, v := range h {
			if m.Header.Get(k) == "" && k != HeaderMsgID {
				m.Header[k] = append([]string(nil), v...)
			}
		}
	}
}

// PublishRaw publishes an already validated, encoded envelope.
func PublishRaw(ctx context.Context, js jetstream.JetStream, eventType, idempotencyKey, correlationID string, data []byte, opts ...PublishOption) (*jetstream.PubAck, error) {
	msg := &nats.Msg{Subject: Subject(eventType), Data: data, Header: nats.Header{}}
	msg.Header.Set(HeaderCorrelationID, correlationID)
	msg.Header.Set(HeaderType, eventType)
	for _, o := range opts {
		o(msg)
	}
	ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(idempotencyKey))
	if err != nil {
		return nil, fmt.Errorf("publish %s to %s: %w", eventType, msg.Subject, err)
	}
	return ack, nil
}
