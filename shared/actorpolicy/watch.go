package actorpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/natsx"
)

// Watch is every actor policy of the control bucket, kept in memory by a watch of the
// policy keys (Keys): a change applies as soon as NATS delivers it, and reading an
// actor's policy costs no request. StartWatch returns once the stored policies are in.
type Watch struct {
	mu    sync.RWMutex
	byKey map[string]*Policy
}

// StartWatch starts the watch, which lasts as long as the process; ctx bounds only the
// wait for the stored policies. A policy that cannot be decoded is logged and treated as
// absent (the file's limits).
func StartWatch(ctx context.Context, control jetstream.KeyValue, log *slog.Logger) (*Watch, error) {
	w, err := control.Watch(context.Background(), Keys)
	if err != nil {
		return nil, fmt.Errorf("watch actor policies: %w", err)
	}
	ps := &Watch{byKey: map[string]*Policy{}}
	var in natsx.Initial
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("watch actor policies: the watch ended before the stored policies were read")
			}
			if e != nil {
				ps.apply(e, log)
			}
			if in.Done(e) { // the stored policies are in (natsx.Initial: the nil marker can come early)
				go ps.follow(w, log)
				return ps, nil
			}
		case <-ctx.Done():
			_ = w.Stop()
			return nil, fmt.Errorf("watch actor policies: %w", ctx.Err())
		}
	}
}

func (ps *Watch) follow(w jetstream.KeyWatcher, log *slog.Logger) {
	for e := range w.Updates() {
		if e != nil {
			ps.apply(e, log)
		}
	}
}

func (ps *Watch) apply(e jetstream.KeyValueEntry, log *slog.Logger) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if e.Operation() != jetstream.KeyValuePut {
		delete(ps.byKey, e.Key())
		return
	}
	var p Policy
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		log.Warn("an actor policy cannot be read; the actor keeps the file's limits", "key", e.Key(), "err", err)
		delete(ps.byKey, e.Key())
		return
	}
	ps.byKey[e.Key()] = &p
}

// Get is actor's policy, nil when it has none.
func (ps *Watch) Get(actor string) *Policy {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return ps.byKey[Key(actor)]
}
