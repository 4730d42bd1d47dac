// Command event-processor turns validated proposals into domain events, applies each to the
// world graph exactly once and publishes it on world.committed.<type>. It is the only
// component configured with the graph's write credentials.
//
//	event-processor -nats-url nats://127.0.0.1:4222 -graph-url ws://127.0.0.1:8182/gremlin \
//	    -graph-user worldgate -admin 127.0.0.1:9105
//
// Every flag has a WORLDGATE_* environment equivalent (WORLDGATE_GRAPH_PASSWORD, …).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/shared/admin"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/tracing"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "event-processor:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("event-processor", flag.ContinueOnError)
	var nc natsx.ConnConfig
	nc.RegisterFlags(fs, "event-processor", false)
	gs := graphx.Settings{URL: "ws://127.0.0.1:8182/gremlin", Username: "worldgate"}
	gs.RegisterFlags(fs, "graph-")
	adminAddr := fs.String("admin", "127.0.0.1:9105", "admin address for /metrics, /healthz, /readyz")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var provisioning natsx.Provisioning
	provisioning.RegisterFlags(fs)
	inFlight := fs.Int("max-in-flight", processor.DefaultMaxInFlight, "proposals of one partition applied at once (a replica applies this many per partition it owns); one actor's always apply in stream order")
	ackWait := fs.Duration("ack-wait", 10*time.Second, "how long a crashed processor's messages wait before redelivery (a live processor keeps those it holds in progress)")
	attestKeys := fs.String("attest-keys", "", "directory of the gates' public keys, <gate>.pub and <gate>.<id>.pub during a rotation (docs/attestation.md); required")
	routesFile := fs.String("routes", "", "routes file (YAML), the same the gates use; empty: the embedded default")
	var prune processor.PruneConfig
	fs.DurationVar(&prune.Horizon, "marker-horizon", 72*time.Hour, "apply-once markers are dropped from the graph this long after their commit; at least WORLD's plus PROPOSALS' max age (checked at start)")
	fs.DurationVar(&prune.Interval, "marker-prune-interval", time.Minute, "how often markers past the horizon are pruned")
	tc := tracing.Config{ServiceName: processor.Name}
	tc.RegisterFlags(fs)
	if err := config.Parse(fs, os.Args[1:], config.Prefix); err != nil {
		return err
	}
	log := logx.New(os.Stderr, processor.Name, *logLevel)
	gctune.Apply(gctune.Default, log)
	if *attestKeys == "" {
		return errors.New("-attest-keys is required: nothing is committed without the gates' attested decisions (docs/attestation.md)")
	}
	keyring, err := attest.LoadKeyring(*attestKeys)
	if err != nil {
		return err
	}
	routes, err := route.Load(*routesFile, route.Known()...)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stopTracing, err := tracing.Setup(ctx, tc)
	if err != nil {
		return err
	}
	defer func() {
		if err := stopTracing(); err != nil {
			log.Warn("tracing: the last spans were not exported", "err", err)
		}
	}()

	nc.Name = processor.Name
	conn, js, err := natsx.Connect(nc, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := provisioning.AtStart(ctx, js, log); err != nil {
		return err
	}
	if err := natsx.Await(ctx, "the marker horizon against the streams", log, func(ctx context.Context) error {
		return checkHorizon(ctx, js, prune.Horizon)
	}); err != nil {
		return err
	}
	graph, err := graphx.Open(gs)
	if err != nil {
		return err
	}
	defer graph.Close()

	reg := metrics.NewRegistry()
	app, err := runtime.New(runtime.Options{Name: processor.Name, Description: "applies validated proposals to the world graph",
		Conn: conn, JetStream: js, Registerer: reg, Logger: log})
	if err != nil {
		return err
	}
	p, err := processor.Register(app, processor.Deps{Graph: graph, Keyring: keyring, Routes: &routes, Registerer: reg, Logger: log,
		MaxInFlight: *inFlight, AckWait: *ackWait})
	if err != nil {
		return err
	}
	reg.MustRegister(natsx.NewLagCollector(js, log, events.StreamProposals))
	pruner, err := processor.NewPruner(graph, prune, reg, log)
	if err != nil {
		return err
	}
	go pruner.Run(ctx)
	adm := admin.New(reg, log)
	adm.AddCheck("graph", p.Ready)
	adm.AddCheck("handlers", app.Ready)
	if err := adm.Start(*adminAddr); err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = adm.Close(sctx)
	}()
	log.Info("event-processor started", "admin", adm.Addr(), "graph", gs.URL, "maxInFlight", *inFlight)
	return app.Run(ctx)
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
	return processor.CheckHorizon(horizon, t)
}
