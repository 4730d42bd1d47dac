// Command mcp-propose serves Worldgate's proposal tools for outside narrators
// (propose-dialogue-line, propose-quest-seed, propose-ambience, enqueue-world-event,
// proposal-status) over Streamable HTTP (at /mcp, bearer token with scope propose, separate
// from the read-only servers' scopes) or stdio (trusted local use, no token). Nothing is
// written to the world here: proposals go through the gates as the narrator emitter, on
// proposals.emit.narrator, the only proposal subject its NATS user (mcp-propose) may publish to.
//
//	mcp-propose -nats-url nats://127.0.0.1:4222 -nats-user mcp-propose -nats-password … \
//	            -issuer https://auth.example.com -resource https://mcp-propose.example.com/mcp
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/mcp-propose/proposetools"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-propose:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) > 1 && os.Args[1] == "issue-token" {
		return mcpx.IssueTokenCommand(os.Args[2:], os.Stdout)
	}
	var f mcpx.CommonFlags
	fs := flag.NewFlagSet("mcp-propose", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:7404", "127.0.0.1:9404")
	ncfg := natsx.ConnConfig{Name: "mcp-propose", User: "mcp-propose"}
	ncfg.RegisterFlags(fs, "mcp-propose", false)
	routesFile := fs.String("routes", "", "routes file (default: the embedded routes); must be the gates' own")
	statusWait := fs.Duration("status-wait", 5*time.Second, "how long proposal-status reads the outcomes at most")
	if err := config.Parse(fs, os.Args[1:], mcpx.EnvPrefix); err != nil {
		return err
	}
	logger := f.Logger(os.Stderr, "mcp-propose")
	gctune.Apply(gctune.ShortLived, logger)
	routes, err := route.Load(*routesFile)
	if err != nil {
		return err
	}
	nc, js, err := natsx.Connect(ncfg, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := nc.Drain(); err != nil {
			logger.Warn("NATS drain at stop", "err", err)
		}
	}()
	reg := metrics.NewRegistry()
	common, err := f.ServerOptions(logger, reg)
	if err != nil {
		return err
	}
	srv, err := proposetools.New(proposetools.Options{Options: common, JetStream: js, Routes: &routes, StatusWait: *statusWait})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mcpx.Mount(mux, "/mcp", srv.Handler(), common.Auth, mcpx.ScopePropose)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return mcpx.Run(ctx, mcpx.RunOptions{Flags: &f, Service: "mcp-propose", Logger: logger, Server: srv.MCP(), Handler: mux, Gatherer: reg, NATS: nc,
		Ready: func(context.Context) error {
			if !nc.IsConnected() {
				return fmt.Errorf("NATS: %s", nc.Status())
			}
			return nil
		}})
}
