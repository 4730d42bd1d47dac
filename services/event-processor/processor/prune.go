package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/event-processor/apply"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Apply-once markers (AppliedEvent, CommitConflict) are what makes a redelivered or repeated
// proposal apply once; each costs graph memory, so they are pruned once they are older than a
// horizon. The horizon must outlast every way a proposal can come back:
//
//   - a redelivery of the validated proposal: at most as long as PROPOSALS keeps it;
//   - the world event redelivered to, or re-run by, an agent, which makes the same proposal id
//     again (ids are derived from the event id): at most as long as WORLD keeps the event,
//     plus the proposal's own time on PROPOSALS.
//
// So the horizon is at least WORLD's plus PROPOSALS' max age (CheckHorizon); within it every
// proposal applies exactly once. A proposal that arrives after its marker was pruned (a game
// backend republishing an event with its old id days later) would apply again.

// PruneConfig configures marker pruning.
type PruneConfig struct {
	// Horizon is how long after its commit a marker is kept. Default 72h.
	Horizon time.Duration
	// Interval between pruning rounds. Default 1m.
	Interval time.Duration
	// Batch bounds the markers dropped per graph request. Default 1000.
	Batch int
	Now   func() time.Time
}

func (c *PruneConfig) setDefaults() {
	if c.Horizon <= 0 {
		c.Horizon = 72 * time.Hour
	}
	if c.Interval <= 0 {
		c.Interval = time.Minute
	}
	if c.Batch <= 0 {
		c.Batch = 1000
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// CheckHorizon refuses a horizon that a proposal may outlive on the streams of t.
func CheckHorizon(horizon time.Duration, t natsx.Topology) error {
	var need time.Duration
	for _, s := range t.Streams {
		if s.Name == events.StreamWorld || s.Name == events.StreamProposals {
			if s.MaxAge <= 0 {
				return fmt.Errorf("stream %s keeps messages for ever: no marker horizon is safe", s.Name)
			}
			need += s.MaxAge
		}
	}
	if horizon < need {
		return fmt.Errorf("marker horizon %v is shorter than WORLD's and PROPOSALS' max ages together (%v): a redelivered proposal could apply twice", horizon, need)
	}
	return nil
}

// Pruner drops markers older than its horizon, in batches.
type Pruner struct {
	g      Graph
	cfg    PruneConfig
	log    *slog.Logger
	pruned prometheus.Counter
	rounds *prometheus.CounterVec
}

// NewPruner returns a Pruner over g (a writer connection).
func NewPruner(g Graph, cfg PruneConfig, reg prometheus.Registerer, log *slog.Logger) (*Pruner, error) {
	if g == nil || reg == nil || log == nil {
		return nil, errors.New("marker pruner: a graph, a registerer and a logger are required")
	}
	cfg.setDefaults()
	return &Pruner{g: g, cfg: cfg, log: log,
		pruned: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "markers_pruned_total",
			Help: "Apply-once markers (AppliedEvent, CommitConflict) dropped from the graph past the marker horizon.",
		})),
		rounds: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "marker_prune_rounds_total",
			Help: "Marker pruning rounds, by outcome (ok, error).",
		}, []string{"outcome"})),
	}, nil
}

// PruneOnce drops every marker committed before now − horizon, a batch per request, and
// returns how many it dropped. committedUtc is RFC 3339 in UTC, so it orders as a string.
func (p *Pruner) PruneOnce(ctx context.Context) (int, error) {
	cutoff := p.cfg.Now().Add(-p.cfg.Horizon).UTC().Format(time.RFC3339)
	total := 0
	for {
		ids, err := p.g.Submit(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
			return g.V().HasLabel(apply.LabelApplied, apply.LabelConflict).
				Has("committedUtc", gremlingo.P.Lt(cutoff)).Limit(p.cfg.Batch).Id()
		})
		if err != nil {
			return total, fmt.Errorf("find markers before %s: %w", cutoff, err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		if _, err := p.g.Submit(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
			return g.V(ids...).Drop()
		}); err != nil {
			return total, fmt.Errorf("drop %d markers: %w", len(ids), err)
		}
		total += len(ids)
		p.pruned.Add(float64(len(ids)))
		if len(ids) < p.cfg.Batch {
			return total, nil
		}
	}
}

// Run prunes every interval until ctx ends; a failed round is logged and retried next time.
func (p *Pruner) Run(ctx context.Context) {
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	for {
		n, err := p.PruneOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			p.rounds.WithLabelValues("error").Inc()
			p.log.Warn("marker pruning failed; retrying next round", "err", err, "pruned", n)
		case err == nil:
			p.rounds.WithLabelValues("ok").Inc()
			if n > 0 {
				p.log.Info("markers pruned", "pruned", n, "horizon", p.cfg.Horizon)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
