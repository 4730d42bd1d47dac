// Package events is Worldgate's publisher-facing contract: the WorldEventEnvelope, the proposal,
// rejection and domain-event messages, the subjects they travel on, the headers they carry, one
// strict decoder for each, and a helper to publish an envelope to JetStream.
//
// Game backends import this module and nothing else of Worldgate. It therefore keeps its
// dependencies few (nats.go, a JSON Schema validator, validator/v10, uuid) and knows nothing of
// the workers that consume the messages.
//
// Its subpackages hold contracts the services share among themselves, below every service:
// provenance, route (the routes file and the gate names; it adds a YAML parser), slip
// (routing-slip mechanics) and fallback (the ai-worker's static content, which the dedup gate
// recognises). A game backend that does not import them does not compile them. Shared
// contracts that need more than a publisher should carry live in the shared module instead:
// gate attestation (shared/attest, an Ed25519 implementation) and the actor policy
// (shared/actorpolicy, a record of a deployment's KV bucket).
package events
