package worldtools

import (
	"context"
	"flag"

	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// Program is mcp-world's process. NATS is for the COMMITTED stream (list-recent-events) and the
// interaction memory (get-recent-dialogue), which are off without it; it also registers the
// server with NATS service discovery (worldgate status).
var Program = service.MCPProgram{Name: "mcp-world", Listen: "127.0.0.1:7401", Admin: "127.0.0.1:9401", Scope: mcpx.ScopeWorldRead}

// ServiceConfig is mcp-world's configuration: its flags (RegisterFlags), its process's argv
// (Args) and environment (Env).
type ServiceConfig struct {
	service.MCPProcess
	Graph  graphx.Settings
	Stream string
}

// DefaultServiceConfig is the configuration with every flag at its default.
func DefaultServiceConfig() ServiceConfig {
	return service.Defaults((*ServiceConfig).RegisterFlags)
}

// RegisterFlags registers mcp-world's flags on fs, each with its default.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	Program.RegisterFlags(fs, &c.MCPProcess)
	c.Graph = graphx.Settings{URL: "ws://127.0.0.1:8182/gremlin", Username: "reader", ReadOnly: true}
	c.Graph.RegisterFlags(fs, "graph-")
	fs.StringVar(&c.Stream, "stream", DefaultStream, "committed stream name")
}

// MCPProc is the process part of the configuration (service.MCPConfig).
func (c *ServiceConfig) MCPProc() *service.MCPProcess { return &c.MCPProcess }

// Args is the argv of an mcp-world process with this configuration.
func (c ServiceConfig) Args() []string {
	return service.Args(DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Env is the same configuration as environment variables.
func (c ServiceConfig) Env() []string {
	return service.MCPEnv(DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Start builds mcp-world on in: the graph (in.Graph, or -graph-*) and, with NATS, COMMITTED
// and the interaction memory.
func Start(_ context.Context, in service.MCPInfra, c ServiceConfig) (*service.MCPServer, error) {
	o := Options{Options: in.Options, Graph: c.Graph, JetStream: in.JetStream, Stream: c.Stream}
	if in.Graph != nil {
		o.Graph, o.GraphConn = graphx.Settings{}, in.Graph
	}
	srv, err := New(o)
	if err != nil {
		return nil, err
	}
	return &service.MCPServer{MCP: srv.MCP(), Handler: srv.Handler(), Ready: srv.Ready, Close: srv.Close}, nil
}
