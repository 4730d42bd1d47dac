// Package runtime is the one worker runtime every Worldgate worker stands on: Watermill's
// message and handler types, a small subscriber and Publisher written here over nats.go's
// jetstream package, and middleware for correlation ids, panic recovery, retries, bounded
// redelivery with backoff, dead letters, metrics and logs.
//
// Each message is handled and settled (acknowledged, or handed back for redelivery) on one
// pooled goroutine, from its delivery on: Watermill's Router, which the runtime used until
// 2026-11-26, handed each message from the subscriber to its loop, to a goroutine of its own,
// to the pool, and its acknowledgement back to a goroutine of the subscriber's, and every
// hand-over between threads is a futex wake-up, dear on a virtual machine (docs/performance.md).
//
// Why our own Subscriber and Publisher rather than watermill-nats: its pkg/nats uses the legacy
// push-consumer API, and its pkg/jetstream (v2.1.3, marked beta) dereferences a nil message
// when unmarshalling fails, does not expose the delivery count (which bounded redelivery and
// dead-lettering need), and leaves a timed-out message unacknowledged. Ours uses durable pull
// consumers shared by every replica, carries the delivery count in metadata, negative-acks with
// a backoff delay, and sets Nats-Msg-Id from the message UUID so every hop is de-duplicated.
//
// A handler is a plain watermill HandlerFunc: it returns the messages to publish, and the input
// is acknowledged only after JetStream has acknowledged every one of them. It must not know
// about acks, retries or dead letters; those wrap it from outside.
package runtime
