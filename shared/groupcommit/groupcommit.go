// Package groupcommit shares requests among concurrent callers without making any of them wait
// for a batch to fill: a call is sent at once while fewer than Requests requests are in
// flight; otherwise it waits, and the next request carries every call that waited, up to Max.
// At a low rate each call goes alone; under load a request carries many, and whatever a
// request costs besides its items (a round trip, a decode, a transaction, an fsync) is paid
// once for them.
//
// A call joins only a request sent after it arrived, so what the request reads or writes is at
// least as fresh as it would have been alone. Calls that must not share a request (one actor's
// writes that must apply in order) must not be made concurrently: the Group orders nothing.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Result is one call's answer.
type Result[O any] struct {
	Value O
	Err   error
}

// Group sends the calls of concurrent callers in shared requests. Build it with New.
type Group[I, O any] struct {
	max, requests int
	send          func(ctx context.Context, items []I) []Result[O]

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*call[I, O]
	sending int
}

type call[I, O any] struct {
	item I
	done bool
	res  Result[O]
}

// New returns a Group whose requests carry at most most calls (at least 1), with at most
// requests of them in flight at once (at least 1). send makes one request of items and
// returns one Result per item, in order; it runs in the goroutine of one of the callers,
// under that caller's context values but not its cancellation (the request carries other
// callers' items too): send bounds the request's time itself.
func New[I, O any](most, requests int, send func(ctx context.Context, items []I) []Result[O]) *Group[I, O] {
	g := &Group[I, O]{max: max(1, most), requests: max(1, requests), send: send}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Do returns item's result, from a request of its own or one it shares.
func (g *Group[I, O]) Do(ctx context.Context, item I) (O, error) {
	me := &call[I, O]{item: item}
	g.mu.Lock()
	g.queue = append(g.queue, me)
	for !me.done {
		if g.sending >= g.requests || len(g.queue) == 0 {
			g.cond.Wait()
			continue
		}
		n := min(len(g.queue), g.max)
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		if len(g.queue) == 0 {
			g.queue = nil // let the array go
		}
		g.sending++
		g.mu.Unlock()
		results := g.run(ctx, batch)
		g.mu.Lock()
		g.sending--
		for i, c := range batch {
			c.res = results[i]
			c.done = true
		}
		g.cond.Broadcast()
	}
	g.mu.Unlock()
	return me.res.Value, me.res.Err
}

// Waiting is how many calls wait for a request now.
func (g *Group[I, O]) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// run sends batch; a panic in send, or a result count that does not match, is every call's
// error rather than a lost caller.
func (g *Group[I, O]) run(ctx context.Context, batch []*call[I, O]) (results []Result[O]) {
	items := make([]I, len(batch))
	for i, c := range batch {
		items[i] = c.item
	}
	defer func() {
		if r := recover(); r != nil {
			results = failAll[O](len(batch), &PanicError{Value: r})
		}
	}()
	results = g.send(context.WithoutCancel(ctx), items)
	if len(results) != len(batch) {
		return failAll[O](len(batch), errCount)
	}
	return results
}

// PanicError is every call's error when send panicked on their request.
type PanicError struct{ Value any }

func (e *PanicError) Error() string {
	return fmt.Sprintf("groupcommit: the request panicked: %v", e.Value)
}

var errCount = errors.New("groupcommit: the request returned another number of results than it carried calls")

func failAll[O any](n int, err error) []Result[O] {
	out := make([]Result[O], n)
	for i := range out {
		out[i].Err = err
	}
	return out
}
