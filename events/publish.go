package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publish validates env exactly as Worldgate will read it and publishes it to Subject(env.Type)
// with Nats-Msg-Id = env.IdempotencyKey, waiting for JetStream's acknowledgement. A republished
// envelope with the same key inside the WORLD stream's duplicate window is stored once; the
// returned ack then has Duplicate set. When the acknowledgement does not come back (ctx's
// deadline, the client's timeout), Publish asks once more with the same Nats-Msg-Id before
// failing, so an event that was stored is never reported as a failure; what it cannot confirm
// is an *UnconfirmedError.
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
	if err != nil && ackLost(err) {
		// The message may have been stored and only its acknowledgement lost. Ask again with
		// the same Nats-Msg-Id: JetStream answers Duplicate for a stored one (and stores it
		// now if it was not), so a stored event is never reported as a failure.
		confirm, cancel := context.WithTimeout(context.WithoutCancel(ctx), confirmTimeout)
		defer cancel()
		if again, err2 := js.PublishMsg(confirm, msg, jetstream.WithMsgID(idempotencyKey)); err2 == nil {
			return again, nil
		}
		return nil, &UnconfirmedError{Type: eventType, Subject: msg.Subject, IdempotencyKey: idempotencyKey,
			Inbox: inboxRefused(js), Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("publish %s to %s: %w", eventType, msg.Subject, err)
	}
	return ack, nil
}

// confirmTimeout bounds the second publish that confirms an event whose acknowledgement was
// lost.
const confirmTimeout = 3 * time.Second

// ackLost reports whether a publish error means no acknowledgement came back (so the message
// may or may not be stored), as opposed to a refusal (no stream for the subject, say).
func ackLost(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

// UnconfirmedError is Publish's error when JetStream acknowledged neither the publish nor a
// second one with the same Nats-Msg-Id: the event may or may not be stored. Publishing the
// same envelope again is safe: JetStream stores one copy per idempotency key.
type UnconfirmedError struct {
	Type, Subject, IdempotencyKey string
	// Inbox is set when the server refused this connection's reply inbox (the usual cause:
	// connected without the inbox prefix Worldgate's permissions require).
	Inbox string
	Err   error
}

func (e *UnconfirmedError) Error() string {
	s := fmt.Sprintf("publish %s to %s: no acknowledgement from JetStream (%v), nor for a second publish with the same idempotency key %q: the event may or may not be stored; publishing the same envelope again is safe",
		e.Type, e.Subject, e.Err, e.IdempotencyKey)
	if e.Inbox != "" {
		s += "; the server refused this connection's reply inbox (" + e.Inbox + "), so no acknowledgement can reach it: connect with events.Connect, or set nats.CustomInboxPrefix(\"_INBOX.<your NATS user>\")"
	}
	return s
}

func (e *UnconfirmedError) Unwrap() error { return e.Err }

// inboxRefused returns the server's permissions violation for the connection's reply inbox,
// if it reported one.
func inboxRefused(js jetstream.JetStream) string {
	nc := js.Conn()
	if nc == nil || nc.LastError() == nil {
		return ""
	}
	if msg := nc.LastError().Error(); strings.Contains(msg, "ermissions") && strings.Contains(msg, "_INBOX") {
		return msg
	}
	return ""
}
