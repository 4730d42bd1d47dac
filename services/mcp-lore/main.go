// Command mcp-lore serves Worldgate's read-only lore tools (search-lore,
// get-canonical-fact) over Streamable HTTP (at /mcp, bearer token with scope
// lore:read) or stdio (trusted local use, no token). Facts are LoreFact
// vertices read with the graph's read-only user, and/or a JSON facts file.
//
//	mcp-lore -graph-url ws://127.0.0.1:8182/gremlin -graph-user reader -graph-password reader-dev -token-file tokens.json
//	mcp-lore -transport stdio -facts facts.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/metrics"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/natsx"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-lore:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) > 1 && os.Args[1] == "issue-token" {
		return mcpx.IssueTokenCommand(os.Args[2:], os.Stdout)
	}
	var f mcpx.CommonFlags
	fs := flag.NewFlagSet("mcp-lore", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:7402", "127.0.0.1:9402")
	graph := graphx.Settings{Username: "reader", ReadOnly: true} // no URL: lore from files only
	graph.RegisterFlags(fs, "graph-")
	factsFile := fs.String("facts", "", "JSON file of extra facts [{id,title,text,tags,canonical}]")
	refresh := fs.Duration("refresh", time.Minute, "reload facts from the graph this often")
	// NATS only registers the server with service discovery (worldgate status).
	ncfg := natsx.ConnConfig{Name: "mcp-lore", User: "mcp-lore"}
	ncfg.RegisterFlags(fs, "mcp-lore", true)
	if err := config.Parse(fs, os.Args[1:], mcpx.EnvPrefix); err != nil {
		return err
	}
	logger := f.Logger(os.Stderr, "mcp-lore")
	gctune.Apply(gctune.ShortLived, logger)
	var facts []loretools.Fact
	if *factsFile != "" {
		data, err := os.ReadFile(*factsFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &facts); err != nil {
			return fmt.Errorf("facts file: %w", err)
		}
	}
	var nc *nats.Conn
	if ncfg.URL != "" {
		c, _, err := natsx.Connect(ncfg, logger)
		if err != nil {
			return err
		}
		defer func() {
			if err := c.Drain(); err != nil {
				logger.Warn("NATS drain at stop", "err", err)
			}
		}()
		nc = c
	}
	reg := metrics.NewRegistry()
	common, err := f.ServerOptions(logger, reg)
	if err != nil {
		return err
	}
	srv, err := loretools.New(loretools.Options{
		Options:         common,
		Graph:           graph,
		Facts:           facts,
		RefreshInterval: *refresh,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go srv.Run(ctx)
	mux := http.NewServeMux()
	mcpx.Mount(mux, "/mcp", srv.Handler(), common.Auth, mcpx.ScopeLoreRead)
	return mcpx.Run(ctx, mcpx.RunOptions{Flags: &f, Service: "mcp-lore", Logger: logger, Server: srv.MCP(), Handler: mux, Gatherer: reg, Ready: srv.Ready, NATS: nc})
}
