// Command mcp-classify serves Worldgate's read-only classification tools
// (classify-intent, moderate-content) over Streamable HTTP (at /mcp, bearer
// token with scope classify:read) or stdio (trusted local use, no token).
//
//	mcp-classify -listen :7403 -admin :9403 -token-file tokens.json
//	mcp-classify -transport stdio
//	WORLDGATE_MCP_JWT_SECRET=... mcp-classify issue-token -subject ai-worker -scopes classify:read
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/metrics"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/shared/mcpx"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-classify:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) > 1 && os.Args[1] == "issue-token" {
		return mcpx.IssueTokenCommand(os.Args[2:], os.Stdout)
	}
	var f mcpx.CommonFlags
	fs := flag.NewFlagSet("mcp-classify", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:7403", "127.0.0.1:9403")
	if err := config.Parse(fs, os.Args[1:], mcpx.EnvPrefix); err != nil {
		return err
	}
	logger := f.Logger(os.Stderr, "mcp-classify")
	reg := metrics.NewRegistry()
	common, err := f.ServerOptions(logger, reg)
	if err != nil {
		return err
	}
	srv, err := classifytools.New(classifytools.Options{Options: common})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mcpx.Mount(mux, "/mcp", srv.Handler(), common.Auth, mcpx.ScopeClassifyRead)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return mcpx.Run(ctx, mcpx.RunOptions{Flags: &f, Service: "mcp-classify", Logger: logger, Server: srv.MCP(), Handler: mux, Gatherer: reg})
}
