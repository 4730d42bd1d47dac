package runtime

import "github.com/ThreeDotsLabs/watermill/message"

// WrapChain wraps the handler chain of a's i-th handler, for tests of what runs around a chain.
func WrapChain(a *App, i int, wrap func(func(*message.Message) error) func(*message.Message) error) {
	a.chains[i] = wrap(a.chains[i])
}
