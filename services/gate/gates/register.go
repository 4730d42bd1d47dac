package gates

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// ToolCaller calls an MCP tool; *client.Client (shared/mcpx/client) is one.
type ToolCaller interface {
	Call(ctx context.Context, tool string, args any) (*client.Result, error)
}

// Graph runs read-only traversals; *graphx.Conn opened with ReadOnly is one.
type Graph interface {
	Submit(ctx context.Context, build func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal) ([]any, error)
}

// TemplateLookup tells the replay gate the SHA-256 of a prompt template version. The
// ai-worker's template registry is the real one; TemplateMap serves tests and configuration.
type TemplateLookup interface {
	Lookup(id, version string) (sha256 string, ok bool)
}

// TemplateMap is a TemplateLookup keyed "id@version".
type TemplateMap map[string]string

// Lookup implements TemplateLookup.
func (m TemplateMap) Lookup(id, version string) (string, bool) {
	s, ok := m[id+"@"+version]
	return s, ok
}

// Deps are what the gates need. Each gate's constructor refuses the ones it needs but lacks;
// gates that are not registered need nothing.
type Deps struct {
	JetStream jetstream.JetStream // KV buckets (dedup, rate, approvals, retry tickets) and the audit stream
	Classify  ToolCaller          // mcp-classify (safety)
	Graph     Graph               // read-only graph (invariant)
	Templates TemplateLookup      // prompt templates (replay)
	Routes    *events.Routes      // nil: route.Default() (schema checks a proposal's route against it)
	// Signers are the gates' signing keys, by gate name: every registered gate signs each
	// decision with its own (package attest); Register refuses a gate without one.
	Signers    map[string]*attest.Signer
	Config     Config
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time // nil: time.Now
}

// Config tunes the gates; the zero value is DefaultConfig.
type Config struct {
	// MaxDeliver is how many deliveries an infrastructure failure gets before the proposal is
	// dead-lettered (audit rejects with AUDIT_UNAVAILABLE instead). Default 5.
	MaxDeliver int
	// Backoff is the delay before each redelivery (last repeats). Default 500ms, 2s, 5s, 15s.
	Backoff []time.Duration
	// AckWait is how soon a crashed gate process's proposals are redelivered; a process that
	// starts while proposals are held elsewhere takes none for that long, so that one actor's
	// stay in order (runtime.Consumer). Default 10s.
	AckWait   time.Duration
	Safety    SafetyConfig
	Invariant InvariantConfig
	Dedup     DedupConfig
	Rate      RateConfig
	Approval  ApprovalConfig
	// NoFusion makes every gate hop through JetStream even when the route's next gate runs in
	// the same process (gate -fuse=false, for comparisons). By default consecutive gates of a
	// route registered together are decided in one hop (fusion): one consume, one publish,
	// the same trail, metrics, logs, retry tickets and rejections.
	NoFusion bool
}

// SafetyConfig says which moderation categories block, per policy version.
type SafetyConfig struct {
	// Blocked maps a moderation policy version to the categories that block a proposal; "*"
	// applies to versions not listed. A version with no entry (and no "*") blocks on every
	// flagged category.
	Blocked map[string][]string
}

// InvariantConfig tunes the invariant gate.
type InvariantConfig struct {
	// ReferenceWait bounds how long a world-building proposal waits for entities it references
	// that do not exist yet (created by an earlier proposal of the same batch, not yet
	// committed) before it is rejected as transient. Default 3s; negative: no wait.
	ReferenceWait time.Duration
	// PollInterval is how often the graph is asked again while waiting. Default 100ms.
	PollInterval time.Duration
}

// DedupConfig tunes the near-duplicate gate.
type DedupConfig struct {
	MaxDistance int           // SimHash Hamming distance at or under which texts are near-duplicates; default 14
	Window      time.Duration // how long accepted fingerprints count; default 1h (bounded by the bucket TTL)
	Keep        int           // fingerprints remembered per kind and target; default 64
}

// RateConfig sets the budgets of the rate gate.
type RateConfig struct {
	Window time.Duration // fixed window; default 1m, at most 1h (the bucket keeps windows 2h)
	// Budgets per proposal kind; "*" applies to kinds not listed. Missing: unlimited.
	Budgets map[string]Budget
}

// Budget is what one window allows. Zero fields are unlimited.
type Budget struct {
	ActorCount    int     `json:"actorCount,omitempty" yaml:"actorCount"`
	ActorCostUSD  float64 `json:"actorCostUsd,omitempty" yaml:"actorCostUsd"`
	GlobalCount   int     `json:"globalCount,omitempty" yaml:"globalCount"`
	GlobalCostUSD float64 `json:"globalCostUsd,omitempty" yaml:"globalCostUsd"`
}

// ApprovalConfig tunes the approval gate.
type ApprovalConfig struct {
	Expiry time.Duration // 0: held proposals wait for a person forever
}

// DefaultConfig is the configuration the zero value means.
func DefaultConfig() Config {
	return Config{
		MaxDeliver: 5,
		Backoff:    []time.Duration{500 * time.Millisecond, 2 * time.Second, 5 * time.Second, 15 * time.Second},
		Invariant:  InvariantConfig{ReferenceWait: 3 * time.Second, PollInterval: 100 * time.Millisecond},
		Dedup:      DedupConfig{MaxDistance: 14, Window: time.Hour, Keep: 64},
		Rate: RateConfig{Window: time.Minute, Budgets: map[string]Budget{
			"*": {ActorCount: 30, ActorCostUSD: 0.50, GlobalCount: 3000, GlobalCostUSD: 20},
		}},
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = d.MaxDeliver
	}
	if len(c.Backoff) == 0 {
		c.Backoff = d.Backoff
	}
	if c.Invariant.ReferenceWait == 0 {
		c.Invariant.ReferenceWait = d.Invariant.ReferenceWait
	}
	if c.Invariant.PollInterval <= 0 {
		c.Invariant.PollInterval = d.Invariant.PollInterval
	}
	if c.Dedup.MaxDistance == 0 {
		c.Dedup.MaxDistance = d.Dedup.MaxDistance
	}
	if c.Dedup.Window <= 0 {
		c.Dedup.Window = d.Dedup.Window
	}
	if c.Dedup.Keep <= 0 {
		c.Dedup.Keep = d.Dedup.Keep
	}
	if c.Rate.Window <= 0 {
		c.Rate.Window = d.Rate.Window
	}
	if c.Rate.Budgets == nil {
		c.Rate.Budgets = d.Rate.Budgets
	}
	return c
}

// Names expands a gate list: "all" (alone or among others) is every known gate; names are
// trimmed, deduplicated and checked.
func (r *Registry) Names(list []string) ([]string, error) {
	var out []string
	for _, n := range list {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			continue
		case n == "all":
			for _, k := range r.Known() {
				if !slices.Contains(out, k) {
					out = append(out, k)
				}
			}
		case !slices.Contains(r.Known(), n):
			known := r.Known()
			return nil, fmt.Errorf("unknown gate %q: use one of %s, or all", n, strings.Join(known, ", "))
		case !slices.Contains(out, n):
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no gate to run: name at least one (-gate schema,safety or -gate all)")
	}
	return out, nil
}

// Build constructs the named gates (see Names) without registering them; ctx bounds their
// constructors (Spec.New).
func (r *Registry) Build(ctx context.Context, deps Deps, names []string) ([]Gate, error) {
	names, err := r.Names(names)
	if err != nil {
		return nil, err
	}
	deps, err = deps.complete(r.Known())
	if err != nil {
		return nil, err
	}
	out := make([]Gate, 0, len(names))
	for _, n := range names {
		spec, _ := r.Lookup(n)
		g, err := spec.New(ctx, deps)
		if err != nil {
			return nil, fmt.Errorf("gate %s: %w", n, err)
		}
		if g.Name() != n {
			return nil, fmt.Errorf("gate %s: its constructor built a gate named %q", n, g.Name())
		}
		out = append(out, g)
	}
	return out, nil
}

// complete fills in d's defaults and checks its routes against the known gates.
func (d Deps) complete(known []string) (Deps, error) {
	if d.Logger == nil {
		return d, errors.New("gates: a logger is required")
	}
	if d.Registerer == nil {
		return d, errors.New("gates: a metrics registerer is required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Routes == nil {
		r := route.Default()
		d.Routes = &r
	} else if err := d.Routes.Validate(known); err != nil {
		return d, err
	}
	d.Config = d.Config.withDefaults()
	if d.Config.Rate.Window > time.Hour {
		return d, fmt.Errorf("rate window %s is longer than 1h: the rate bucket keeps windows for 2h", d.Config.Rate.Window)
	}
	return d, nil
}

// Register adds a handler per named gate of the registry to app: each consumes proposals.gate.<name> on the
// durable consumer gate-<name> of stream PROPOSALS, shared by every replica. names may be
// "all". Unless deps.Config.NoFusion, a handler goes on into the route's next gates while they
// are among names (fusion: see chain.handler), so the process publishes once per run. ctx
// bounds the start (the gates' constructors, waiting for the retry tickets bucket). It is what
// `gate` (Start) and `worldgate dev` call.
func (r *Registry) Register(ctx context.Context, app *runtime.App, deps Deps, names []string) error {
	if app == nil {
		return errors.New("gates: a runtime app is required")
	}
	gates, err := r.Build(ctx, deps, names)
	if err != nil {
		return err
	}
	deps, _ = deps.complete(r.Known())
	if deps.JetStream == nil {
		return errors.New("gates: a JetStream context is required (for retry tickets)")
	}
	kv, err := natsx.AwaitKeyValue(ctx, deps.JetStream, natsx.BucketRetries, deps.Logger)
	if err != nil {
		return fmt.Errorf("gates: retry tickets bucket %s: %w (provision the topology first)", natsx.BucketRetries, err)
	}
	for _, g := range gates {
		if s := deps.Signers[g.Name()]; s == nil || s.Gate() != g.Name() {
			return fmt.Errorf("gate %s has no signing key: every gate signs its decisions (generate keys with `worldgate keys`, see docs/attestation.md)", g.Name())
		}
	}
	c := &chain{m: newChainMetrics(deps.Registerer), log: deps.Logger, now: deps.Now, maxDeliver: deps.Config.MaxDeliver, tickets: &tickets{kv: kv},
		signers: deps.Signers, latency: map[string]prometheus.Observer{}}
	for _, g := range gates {
		c.latency[g.Name()] = c.m.latency.WithLabelValues(g.Name())
	}
	if !deps.Config.NoFusion {
		c.fused = map[string]Gate{}
		for _, g := range gates {
			c.fused[g.Name()] = g
		}
	}
	for _, g := range gates {
		durable := Durable(g.Name())
		// One actor's proposals pass in stream order, across a crash too (runtime.Consumer.OrderKey):
		// a player's second move must not overtake the first, which a dead process held.
		app.Handle(durable, runtime.Consumer{
			Stream: events.StreamProposals, Durable: durable, Subjects: InputSubjects(g.Name()),
			MaxDeliver: deps.Config.MaxDeliver, Backoff: deps.Config.Backoff, AckWait: deps.Config.AckWait, OrderKey: events.ActorKey,
		}, c.handler(g))
		spec, _ := r.Lookup(g.Name())
		for _, extra := range spec.Consumers {
			h, err := extra.Handler(g, deps)
			if err != nil {
				return fmt.Errorf("gate %s: consumer %s: %w", g.Name(), extra.Durable, err)
			}
			app.Handle(extra.Durable, runtime.Consumer{
				Stream: events.StreamProposals, Durable: extra.Durable, Subjects: extra.Subjects,
				MaxDeliver: deps.Config.MaxDeliver, Backoff: deps.Config.Backoff, AckWait: deps.Config.AckWait,
			}, h)
		}
	}
	return nil
}
