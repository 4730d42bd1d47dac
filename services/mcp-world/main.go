// Command mcp-world serves Worldgate's read-only world tools (get-location,
// list-exits, get-player-state, get-neighbors, list-recent-events,
// get-recent-dialogue) over Streamable HTTP (at /mcp, bearer token with scope
// world:read) or stdio (trusted local use, no token). It reads the graph as
// the read-only user, and the COMMITTED JetStream stream and the interaction
// memory bucket with direct gets.
//
//	mcp-world -graph-url ws://127.0.0.1:8182/gremlin -graph-user reader -graph-password reader-dev \
//	          -nats-url nats://127.0.0.1:4222 -token-file tokens.json
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-world:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) > 1 && os.Args[1] == "issue-token" {
		return mcpx.IssueTokenCommand(os.Args[2:], os.Stdout)
	}
	var f mcpx.CommonFlags
	fs := flag.NewFlagSet("mcp-world", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:7401", "127.0.0.1:9401")
	graph := graphx.Settings{URL: "ws://127.0.0.1:8182/gremlin", Username: "reader", ReadOnly: true}
	graph.RegisterFlags(fs, "graph-")
	// NATS is for the COMMITTED stream (list-recent-events) and the interaction memory
	// (get-recent-dialogue), which are off without it. It also registers the server with NATS
	// service discovery (worldgate status).
	ncfg := natsx.ConnConfig{Name: "mcp-world", User: "mcp-world"}
	ncfg.RegisterFlags(fs, "mcp-world", true)
	stream := fs.String("stream", worldtools.DefaultStream, "committed stream name")
	if err := config.Parse(fs, os.Args[1:], mcpx.EnvPrefix); err != nil {
		return err
	}
	logger := f.Logger(os.Stderr, "mcp-world")
	gctune.Apply(gctune.ShortLived, logger)
	var js jetstream.JetStream
	var nc *nats.Conn
	if ncfg.URL != "" {
		c, j, err := natsx.Connect(ncfg, logger)
		if err != nil {
			return err
		}
		defer func() {
			if err := c.Drain(); err != nil {
				logger.Warn("NATS drain at stop", "err", err)
			}
		}()
		nc, js = c, j
	}
	reg := metrics.NewRegistry()
	common, err := f.ServerOptions(logger, reg)
	if err != nil {
		return err
	}
	srv, err := worldtools.New(worldtools.Options{
		Options:   common,
		Graph:     graph,
		JetStream: js,
		Stream:    *stream,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	mux := http.NewServeMux()
	mcpx.Mount(mux, "/mcp", srv.Handler(), common.Auth, mcpx.ScopeWorldRead)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return mcpx.Run(ctx, mcpx.RunOptions{Flags: &f, Service: "mcp-world", Logger: logger, Server: srv.MCP(), Handler: mux, Gatherer: reg, Ready: srv.Ready, NATS: nc})
}
