package processor

import (
	"context"
	"errors"
	"sync"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/services/event-processor/apply"
	"github.com/worldgate/worldgate/shared/graphx"
)

// DefaultMaxBatch is how many proposals' writes one graph request carries at most by default.
const DefaultMaxBatch = 16

// batchRequests is how many batched requests the processor has in flight at once: one is
// filled while the other commits, so graphd can share an fsync between them too
// (BenchmarkMoveWrites: two clients sending batches of 8 commit a move for 0.6 of the CPU and
// half the time of eight clients sending one move each).
const batchRequests = 2

// committer applies the commands of the proposals the processor is applying at the same moment
// in shared graph requests (group commit): a command waits only while batchRequests requests
// are in flight, and the next request then carries every command that waited, up to max. At
// a low rate every command goes alone, at once; under load a request carries many, and the
// request's decode, compile, transaction and fsync are paid once for them all.
//
// A batch never holds two proposals of one actor: the runtime hands the processor an actor's
// next proposal only once its previous one is settled (Consumer's OrderKey), so what a batch
// holds was concurrent anyway; the batch applies it in one transaction, in order. Each command
// keeps its apply-once traversal (apply.Batch), so a redelivered proposal finds its marker in a
// batch as it does alone. A batch the graph refuses (a server error, an answer that cannot be
// read) is retried one command per request, so one bad proposal gets its own error and the
// others their decisions; a graph that cannot be reached fails every command of the batch,
// and each is redelivered as it would have been alone.
type committer struct {
	graph Graph
	max   int
	size  prometheus.Observer

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*call
	sending int
}

// call is one command waiting for its decision.
type call struct {
	item  apply.Item
	done  bool
	alone bool // the batch was refused as a whole: apply this command in a request of its own
	d     apply.Decision
	err   error
}

// decodeError is an answer of the graph that cannot be read as a decision: retrying cannot help.
type decodeError struct{ error }

func newCommitter(g Graph, max int, size prometheus.Observer) *committer {
	c := &committer{graph: g, max: max, size: size}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// apply returns its decision, from a request of its own or one it shares. An error is the
// graph's (graphx's classes) or a decodeError.
func (c *committer) apply(ctx context.Context, it apply.Item) (apply.Decision, error) {
	if c.max <= 1 {
		return c.alone(ctx, it)
	}
	me := &call{item: it}
	c.mu.Lock()
	c.queue = append(c.queue, me)
	for !me.done {
		if c.sending < batchRequests && len(c.queue) > 0 {
			n := min(len(c.queue), c.max)
			batch := c.queue[:n:n]
			c.queue = c.queue[n:]
			if len(c.queue) == 0 {
				c.queue = nil // let the array go
			}
			c.sending++
			c.mu.Unlock()
			c.send(ctx, batch)
			c.mu.Lock()
			c.sending--
			for _, b := range batch {
				b.done = true
			}
			c.cond.Broadcast()
			continue
		}
		c.cond.Wait()
	}
	c.mu.Unlock()
	if me.alone {
		return c.alone(ctx, it)
	}
	return me.d, me.err
}

// send submits batch as one request and records each call's decision or error. The request
// runs under ctx's values but not its cancellation: it carries other proposals than the one
// whose handler sends it (graphx bounds it with its read timeout).
func (c *committer) send(ctx context.Context, batch []*call) {
	if len(batch) == 1 {
		batch[0].d, batch[0].err = c.alone(ctx, batch[0].item)
		return
	}
	c.size.Observe(float64(len(batch)))
	items := make([]apply.Item, len(batch))
	for i, b := range batch {
		items[i] = b.item
	}
	res, err := c.graph.Submit(context.WithoutCancel(ctx), func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return apply.Batch(g, items)
	})
	var ds []apply.Decision
	if err == nil {
		ds, err = apply.ReadDecisions(res, items)
		if err != nil {
			err = decodeError{err}
		}
	}
	for i, b := range batch {
		switch {
		case err == nil:
			b.d = ds[i]
		case graphx.IsTransport(err):
			b.err = err
		default:
			b.alone = true
		}
	}
}

// alone applies it in a request of its own.
func (c *committer) alone(ctx context.Context, it apply.Item) (apply.Decision, error) {
	c.size.Observe(1)
	res, err := c.graph.Submit(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return it.Command.Traversal(g, it.Meta)
	})
	if err != nil {
		return apply.Decision{}, err
	}
	d, err := apply.ReadDecision(res)
	if err != nil {
		return apply.Decision{}, decodeError{err}
	}
	return d, nil
}

// isDecode reports whether err is an answer that cannot be read as a decision.
func isDecode(err error) bool {
	var d decodeError
	return errors.As(err, &d)
}
