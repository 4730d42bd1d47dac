// Command edge is Worldgate's HTTP front for game backends and clients that do not speak NATS:
// POST /v1/events publishes world events, GET /v1/outcomes streams their outcomes as Server-Sent
// Events, GET /v1/events/{id}/outcome long-polls one; the OpenAPI 3.1 document is at
// /openapi.json. Clients authenticate with API keys from -keys-file (scopes publish, read:all,
// read:<actor id>; players to restrict a key to; a rate each). It serves no /play console and
// so hands out no key: that is worldgate dev's. It connects to NATS as its own user
// (deploy/nats: edge), which may publish world events, read outcomes, and read back a stored
// world event whose idempotency key a request reuses.
//
//	edge -nats-url nats://127.0.0.1:4222 -nats-user edge -nats-password … -keys-file keys.json
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/worldgate/worldgate/services/edge/edge"
	"github.com/worldgate/worldgate/shared/admin"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "edge:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("edge", flag.ContinueOnError)
	var nc natsx.ConnConfig
	nc.RegisterFlags(fs, "edge", false)
	listen := fs.String("listen", "127.0.0.1:8080", "address of the HTTP API")
	adminAddr := fs.String("admin", "127.0.0.1:9430", "admin address for /metrics, /healthz, /readyz")
	keysFile := fs.String("keys-file", "", `JSON API keys: {"keys":[{"name":…,"sha256":…,"scopes":["publish","read:all"],"rate":20}]} (required)`)
	origins := fs.String("cors-origins", "", "comma-separated browser origins allowed to call the API, each named (e.g. https://game.example; * is refused: answers are authenticated); empty: none")
	sseBuffer := fs.Int("sse-buffer", 256, "outcomes that may wait for a slow SSE client before it is dropped (it resumes with Last-Event-ID)")
	maxBatch := fs.Int("max-batch", 500, "most envelopes in one NDJSON request")
	drain := fs.Duration("drain-timeout", 10*time.Second, "on SIGTERM, how long requests in flight may take to finish")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := config.Parse(fs, os.Args[1:], config.Prefix); err != nil {
		return err
	}
	log := logx.New(os.Stderr, edge.Name, *logLevel)
	gctune.Apply(gctune.Default, log)
	if *keysFile == "" {
		return fmt.Errorf("-keys-file (WORLDGATE_KEYS_FILE) is required: edge serves only known API keys")
	}
	keys, err := edge.LoadKeys(*keysFile)
	if err != nil {
		return err
	}
	ring, err := edge.NewKeyring(keys)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	nc.Name = edge.Name
	conn, js, err := natsx.Connect(nc, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := conn.Drain(); err != nil {
			log.Warn("NATS drain at stop", "err", err)
		}
	}()
	reg := metrics.NewRegistry()
	var allowed []string
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowed = append(allowed, o)
		}
	}
	srv, err := edge.New(edge.Config{JetStream: js, Keys: ring, CORSOrigins: allowed, SSEBuffer: *sseBuffer, MaxBatch: *maxBatch,
		Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	svc, err := edge.Register(conn, "1.0.0", "http://"+ln.Addr().String())
	if err != nil {
		return fmt.Errorf("register with NATS service discovery: %w", err)
	}
	defer func() { _ = svc.Stop() }()
	adm := admin.New(reg, log)
	adm.AddCheck("nats", func(context.Context) error {
		if !conn.IsConnected() {
			return fmt.Errorf("not connected to NATS")
		}
		return nil
	})
	if err := adm.Start(*adminAddr); err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = adm.Close(sctx)
	}()
	log.Info("edge started", "listen", ln.Addr().String(), "admin", adm.Addr(), "keys", len(keys))
	return srv.Serve(ctx, ln, *drain)
}
