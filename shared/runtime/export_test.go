package runtime

import (
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
)

// WrapChain wraps the handler chain of a's i-th handler, for tests of what runs around a chain.
func WrapChain(a *App, i int, wrap func(func(*message.Message) error) func(*message.Message) error) {
	a.chains[i] = wrap(a.chains[i])
}

// PartitionConfig is the server configuration of partition p's consumer of spec, as a replica
// creates it (for tests that act as another client of the partition).
func PartitionConfig(spec Consumer, p int) jetstream.ConsumerConfig {
	g := &partitionGroup{spec: spec}
	return g.unitSpec(p).ServerConfig()
}
