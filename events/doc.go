// Package events is Worldgate's publisher-facing contract: the WorldEventEnvelope, the proposal,
// rejection and domain-event messages, the subjects they travel on, the headers they carry, one
// strict decoder for each, and a helper to publish an envelope to JetStream.
//
// Game backends import this module and nothing else of Worldgate. It therefore keeps its
// dependencies few (nats.go, a JSON Schema validator, validator/v10, uuid) and knows nothing of
// the workers that consume the messages.
package events
