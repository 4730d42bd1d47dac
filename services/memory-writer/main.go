// Command memory-writer keeps Worldgate's interaction memory (package memory): it reads every
// committed domain event (durable memory-writer on COMMITTED) and records, per NPC–player pair,
// the last exchanges and, per NPC, its recent events in KV bucket worldgate-memory, which
// mcp-world's get-recent-dialogue reads. It reads nothing but COMMITTED and writes nothing but
// that bucket; replicas share the durable.
//
//	memory-writer -nats-url nats://127.0.0.1:4222 -nats-user memory-writer -admin 127.0.0.1:9106
//
// Every flag has a WORLDGATE_* environment equivalent.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
	"github.com/worldgate/worldgate/shared/admin"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/tracing"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "memory-writer:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("memory-writer", flag.ContinueOnError)
	var nc natsx.ConnConfig
	nc.RegisterFlags(fs, memory.Name, false)
	adminAddr := fs.String("admin", "127.0.0.1:9106", "admin address for /metrics, /healthz, /readyz")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var provisioning natsx.Provisioning
	provisioning.RegisterFlags(fs)
	var limits memory.Limits
	fs.IntVar(&limits.Exchanges, "exchanges", memory.DefaultLimits.Exchanges, "exchanges kept per NPC–player pair")
	fs.IntVar(&limits.Notes, "notes", memory.DefaultLimits.Notes, "recent events kept per NPC")
	tc := tracing.Config{ServiceName: memory.Name}
	tc.RegisterFlags(fs)
	if err := config.Parse(fs, os.Args[1:], config.Prefix); err != nil {
		return err
	}
	log := logx.New(os.Stderr, memory.Name, *logLevel)
	gctune.Apply(gctune.Default, log)
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

	nc.Name = memory.Name
	conn, js, err := natsx.Connect(nc, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := provisioning.AtStart(ctx, js, log); err != nil {
		return err
	}
	var store *memory.Store
	if err := natsx.Await(ctx, "memory bucket", log, func(ctx context.Context) (err error) {
		store, err = memory.Open(ctx, js, limits)
		return err
	}); err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	app, err := runtime.New(runtime.Options{Name: memory.Name, Description: "keeps the interaction memory from committed events",
		Conn: conn, JetStream: js, Registerer: reg, Logger: log})
	if err != nil {
		return err
	}
	if _, err := memory.Register(app, store, reg, log); err != nil {
		return err
	}
	reg.MustRegister(natsx.NewLagCollector(js, log, events.StreamCommitted))
	adm := admin.New(reg, log)
	adm.AddCheck("handlers", app.Ready)
	if err := adm.Start(*adminAddr); err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = adm.Close(sctx)
	}()
	log.Info("memory-writer started", "admin", adm.Addr(), "exchanges", limits.Exchanges, "notes", limits.Notes)
	return app.Run(ctx)
}
