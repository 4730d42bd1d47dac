package agent

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrMiss is returned by Cache.Get for a key that is not cached.
var ErrMiss = errors.New("not cached")

// Cache stores model outputs by context hash (and the triggers of proposals in flight, for
// reprompts). Keys are dot-separated tokens of [A-Za-z0-9_-].
type Cache interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, value []byte) error
}

// KVCache is a Cache on a JetStream key-value bucket (natsx.BucketAICache, whose TTL bounds
// how long entries live).
type KVCache struct{ KV jetstream.KeyValue }

// Get implements Cache.
func (c KVCache) Get(ctx context.Context, key string) ([]byte, error) {
	e, err := c.KV.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrMiss
	}
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}

// Put implements Cache.
func (c KVCache) Put(ctx context.Context, key string, value []byte) error {
	_, err := c.KV.Put(ctx, key, value)
	return err
}
