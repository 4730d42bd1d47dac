package service

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
)

// MCPProgram describes an MCP server's process: the MCP servers share their flags
// (mcpx.CommonFlags, variables WORLDGATE_MCP_*) and their serving (mcpx.Run).
type MCPProgram struct {
	Name          string
	Listen, Admin string // default addresses
	Scope         string // the scope /mcp requires
	// NATSRequired gives -nats-url the local server as its default (mcp-propose publishes);
	// otherwise it defaults to empty, and the server runs without NATS.
	NATSRequired bool
}

// MCPProcess is what every MCP server process reads besides its own settings.
type MCPProcess struct {
	Common mcpx.CommonFlags
	NATS   natsx.ConnConfig
}

// RegisterFlags registers the process flags of p on fs, with the program's defaults.
func (prog MCPProgram) RegisterFlags(fs *flag.FlagSet, p *MCPProcess) {
	p.Common = mcpx.CommonFlags{}
	p.Common.Register(fs, prog.Listen, prog.Admin)
	p.NATS = natsx.ConnConfig{Name: prog.Name, User: prog.Name}
	p.NATS.RegisterFlags(fs, prog.Name, !prog.NATSRequired)
}

// MCPConfig is an MCP server's configuration as MainMCP reads it.
type MCPConfig interface {
	RegisterFlags(fs *flag.FlagSet)
	MCPProc() *MCPProcess
}

// MCPInfra is what an MCP server runs on: its process's (MainMCP) or the in-process stack's.
type MCPInfra struct {
	// Options are the server options: authentication, origins, rate limit, metrics, logger.
	Options mcpx.Options
	// Conn and JetStream are its NATS connection, as its own user (nil without NATS).
	Conn      *nats.Conn
	JetStream jetstream.JetStream
	// Graph, if set, is a graph connection to share (the stack's reader); nil: a server that
	// reads the graph opens its -graph-* settings.
	Graph *graphx.Conn
}

// MCPServer is a started MCP server.
type MCPServer struct {
	MCP     *mcp.Server
	Handler http.Handler
	Ready   mcpx.Readiness // nil: ready while it serves
	Run     func(ctx context.Context)
	Close   func()
}

// MainMCP is an MCP server program's main: "issue-token" signs a bearer JWT; otherwise it
// parses the flags (and their WORLDGATE_MCP_* variables) into cfg, connects to NATS if
// -nats-url is set, starts the server and serves it (mcpx.Run: /mcp over Streamable HTTP or
// stdio, the admin port, NATS service discovery) until SIGINT or SIGTERM.
func MainMCP(prog MCPProgram, cfg MCPConfig, start func(ctx context.Context, in MCPInfra) (*MCPServer, error)) {
	if err := runMCP(prog, cfg, start); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog.Name, err)
		os.Exit(1)
	}
}

func runMCP(prog MCPProgram, cfg MCPConfig, start func(ctx context.Context, in MCPInfra) (*MCPServer, error)) error {
	if len(os.Args) > 1 && os.Args[1] == "issue-token" {
		return mcpx.IssueTokenCommand(os.Args[2:], os.Stdout)
	}
	fs := flag.NewFlagSet(prog.Name, flag.ExitOnError)
	cfg.RegisterFlags(fs)
	if err := config.Parse(fs, os.Args[1:], mcpx.EnvPrefix); err != nil {
		return err
	}
	p := cfg.MCPProc()
	logger := p.Common.Logger(os.Stderr, prog.Name)
	gctune.Apply(gctune.ShortLived, logger)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var in MCPInfra
	if p.NATS.URL != "" {
		c, js, err := natsx.Connect(p.NATS, logger)
		if err != nil {
			return err
		}
		defer func() {
			if err := c.Drain(); err != nil {
				logger.Warn("NATS drain at stop", "err", err)
			}
		}()
		in.Conn, in.JetStream = c, js
	}
	reg := metrics.NewRegistry()
	var err error
	if in.Options, err = p.Common.ServerOptions(logger, reg); err != nil {
		return err
	}
	srv, err := start(ctx, in)
	if err != nil {
		return err
	}
	if srv.Close != nil {
		defer srv.Close()
	}
	if srv.Run != nil {
		go srv.Run(ctx)
	}
	mux := http.NewServeMux()
	mcpx.Mount(mux, "/mcp", srv.Handler, in.Options.Auth, prog.Scope)
	return mcpx.Run(ctx, mcpx.RunOptions{Flags: &p.Common, Service: prog.Name, Logger: logger, Server: srv.MCP, Handler: mux,
		Gatherer: reg, Ready: srv.Ready, NATS: in.Conn})
}

// MCPEnv is cfg as an MCP server process's environment (WORLDGATE_MCP_*).
func MCPEnv[C any](def, cfg C, register func(*C, *flag.FlagSet)) []string {
	return Env(Program{EnvPrefix: mcpx.EnvPrefix}, def, cfg, register)
}
