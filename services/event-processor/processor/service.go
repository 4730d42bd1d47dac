package processor

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// Program is the event-processor's process: the graph's writer, on NATS as event-processor.
var Program = service.Program{Name: Name, NATSUser: Name, Admin: "127.0.0.1:9105",
	Graph: &graphx.Settings{URL: "ws://127.0.0.1:8182/gremlin", Username: "worldgate"},
	Lag:   []string{events.StreamProposals}, GC: gctune.ShortLived}

// Config is the event-processor's configuration: its flags (RegisterFlags), its process's
// argv (Args) and environment (Env).
type Config struct {
	service.Process
	MaxInFlight int
	MaxBatch    int
	AckWait     time.Duration
	AttestKeys  string // directory of the gates' public keys
	Routes      string // routes file; empty: the embedded default
	Prune       PruneConfig
}

// DefaultConfig is the configuration with every flag at its default.
func DefaultConfig() Config { return service.Defaults((*Config).RegisterFlags) }

// RegisterFlags registers the event-processor's flags on fs, each with its default.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	Program.RegisterFlags(fs, &c.Process)
	fs.IntVar(&c.MaxInFlight, "max-in-flight", DefaultMaxInFlight, "proposals of one partition applied at once (a replica applies this many per partition it owns); one actor's always apply in stream order")
	fs.IntVar(&c.MaxBatch, "max-batch", DefaultMaxBatch, "most proposals whose writes share one graph request: the writes of proposals applied at the same moment go together, none waits for a batch to fill; 1: a request per proposal")
	fs.DurationVar(&c.AckWait, "ack-wait", 10*time.Second, "how long a crashed processor's messages wait before redelivery (a live processor keeps those it holds in progress)")
	fs.StringVar(&c.AttestKeys, "attest-keys", "", "directory of the gates' public keys, <gate>.pub and <gate>.<id>.pub during a rotation (docs/attestation.md); required")
	fs.StringVar(&c.Routes, "routes", "", "routes file (YAML), the same the gates use; empty: the embedded default")
	fs.DurationVar(&c.Prune.Horizon, "marker-horizon", 72*time.Hour, "apply-once markers are dropped from the graph this long after their commit; at least WORLD's plus PROPOSALS' max age (checked at start)")
	fs.DurationVar(&c.Prune.Interval, "marker-prune-interval", time.Minute, "how often markers past the horizon are pruned")
}

// Proc is the process part of the configuration (service.Config).
func (c *Config) Proc() *service.Process { return &c.Process }

// Check reports a configuration the event-processor cannot start with.
func (c *Config) Check() error {
	if c.AttestKeys == "" {
		return errors.New("-attest-keys is required: nothing is committed without the gates' attested decisions (docs/attestation.md)")
	}
	return nil
}

// Args is the argv of an event-processor process with this configuration.
func (c Config) Args() []string { return service.Args(DefaultConfig(), c, (*Config).RegisterFlags) }

// Env is the same configuration as environment variables.
func (c Config) Env() []string {
	return service.Env(Program, DefaultConfig(), c, (*Config).RegisterFlags)
}

// Start runs the event-processor on in (its Graph the writer's connection): it checks the
// marker horizon against the streams, registers the partitioned consumer of PROPOSALS and the
// marker pruner, and returns what runs both.
func Start(ctx context.Context, in service.Infra, c Config) (service.Run, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	keyring, err := attest.LoadKeyring(c.AttestKeys)
	if err != nil {
		return nil, err
	}
	routes, err := route.Load(c.Routes, route.Known()...)
	if err != nil {
		return nil, err
	}
	if err := natsx.Await(ctx, "the marker horizon against the streams", in.Logger, func(ctx context.Context) error {
		return checkHorizon(ctx, in.JetStream, c.Prune.Horizon)
	}); err != nil {
		return nil, err
	}
	app, err := runtime.New(runtime.Options{Name: Name, Description: "applies validated proposals to the world graph",
		Conn: in.Conn, JetStream: in.JetStream, Registerer: in.Registerer, Logger: in.Logger})
	if err != nil {
		return nil, err
	}
	p, err := Register(app, Deps{Graph: in.Graph, Keyring: keyring, Routes: &routes, Registerer: in.Registerer, Logger: in.Logger,
		MaxInFlight: c.MaxInFlight, MaxBatch: c.MaxBatch, AckWait: c.AckWait})
	if err != nil {
		return nil, err
	}
	pruner, err := NewPruner(in.Graph, c.Prune, in.Registerer, in.Logger.With("component", "marker-pruner"))
	if err != nil {
		return nil, err
	}
	in.Admin.AddCheck("graph", p.Ready)
	in.Admin.AddCheck("handlers", app.Ready)
	in.Logger.Info("event-processor registered", "maxInFlight", c.MaxInFlight, "maxBatch", c.MaxBatch)
	return func(ctx context.Context) error {
		go pruner.Run(ctx)
		return app.Run(ctx)
	}, nil
}

// checkHorizon checks the marker horizon against the streams as the server has them (whoever
// provisioned them).
func checkHorizon(ctx context.Context, js jetstream.JetStream, horizon time.Duration) error {
	var t natsx.Topology
	for _, name := range []string{events.StreamWorld, events.StreamProposals} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		t.Streams = append(t.Streams, s.CachedInfo().Config)
	}
	return CheckHorizon(horizon, t)
}
