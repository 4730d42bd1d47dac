package processor

import (
	"context"
	"errors"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/services/event-processor/apply"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/groupcommit"
)

// DefaultMaxBatch is how many proposals' writes one graph request carries at most by default.
const DefaultMaxBatch = 16

// batchRequests is how many batched requests the processor has in flight at once: one is
// filled while the other commits, so graphd can share an fsync between them too
// (BenchmarkMoveWrites: two clients sending batches of 8 commit a move for 0.6 of the CPU and
// half the time of eight clients sending one move each).
const batchRequests = 2

// committer applies the commands of the proposals the processor is applying at the same moment
// in shared graph requests (package groupcommit): a command goes at once while fewer than
// batchRequests requests are in flight, else it waits, and the next request carries every
// command that waited, up to max. At a low rate every command goes alone; under load a request
// carries many, and the request's decode, compile, transaction and fsync are paid once for them.
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
	size  prometheus.Observer
	group *groupcommit.Group[apply.Item, apply.Decision]
}

// decodeError is an answer of the graph that cannot be read as a decision: retrying cannot help.
type decodeError struct{ error }

func newCommitter(g Graph, max int, size prometheus.Observer) *committer {
	c := &committer{graph: g, size: size}
	c.group = groupcommit.New(max, batchRequests, c.send)
	return c
}

// apply returns its decision, from a request of its own or one it shares. An error is the
// graph's (graphx's classes) or a decodeError.
func (c *committer) apply(ctx context.Context, it apply.Item) (apply.Decision, error) {
	return c.group.Do(ctx, it)
}

// send applies items in one request, or each in its own where the graph refused them together.
func (c *committer) send(ctx context.Context, items []apply.Item) []groupcommit.Result[apply.Decision] {
	out := make([]groupcommit.Result[apply.Decision], len(items))
	if len(items) > 1 {
		c.size.Observe(float64(len(items)))
		res, err := c.graph.Submit(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
			return apply.Batch(g, items)
		})
		var ds []apply.Decision
		if err == nil {
			ds, err = apply.ReadDecisions(res, items)
		}
		switch {
		case err == nil:
			for i, d := range ds {
				out[i].Value = d
			}
			return out
		case graphx.IsTransport(err):
			for i := range out {
				out[i].Err = err
			}
			return out
		}
	}
	for i, it := range items {
		out[i].Value, out[i].Err = c.alone(ctx, it)
	}
	return out
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
