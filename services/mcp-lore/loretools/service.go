package loretools

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// Program is mcp-lore's process.
var Program = service.MCPProgram{Name: "mcp-lore", Listen: "127.0.0.1:7402", Admin: "127.0.0.1:9402", Scope: mcpx.ScopeLoreRead}

// ServiceConfig is mcp-lore's configuration: its flags (RegisterFlags), its process's argv
// (Args) and environment (Env).
type ServiceConfig struct {
	service.MCPProcess
	Graph     graphx.Settings // no URL: lore from files only
	FactsFile string
	Refresh   time.Duration
}

// DefaultServiceConfig is the configuration with every flag at its default.
func DefaultServiceConfig() ServiceConfig {
	return service.Defaults((*ServiceConfig).RegisterFlags)
}

// RegisterFlags registers mcp-lore's flags on fs, each with its default.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	Program.RegisterFlags(fs, &c.MCPProcess)
	c.Graph = graphx.Settings{Username: "reader", ReadOnly: true}
	c.Graph.RegisterFlags(fs, "graph-")
	fs.StringVar(&c.FactsFile, "facts", "", "JSON file of extra facts [{id,title,text,tags,canonical}]")
	fs.DurationVar(&c.Refresh, "refresh", time.Minute, "reload facts from the graph this often")
}

// MCPProc is the process part of the configuration (service.MCPConfig).
func (c *ServiceConfig) MCPProc() *service.MCPProcess { return &c.MCPProcess }

// Args is the argv of an mcp-lore process with this configuration.
func (c ServiceConfig) Args() []string {
	return service.Args(DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Env is the same configuration as environment variables.
func (c ServiceConfig) Env() []string {
	return service.MCPEnv(DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Start builds mcp-lore on in: facts from the graph (in.Graph, or -graph-*) and the facts file,
// refreshed by the returned server's Run.
func Start(ctx context.Context, in service.MCPInfra, c ServiceConfig) (*service.MCPServer, error) {
	srv, err := Open(ctx, in, c)
	if err != nil {
		return nil, err
	}
	return &service.MCPServer{MCP: srv.MCP(), Handler: srv.Handler(), Ready: srv.Ready, Run: srv.Run, Close: srv.Close}, nil
}

// Open is Start's server itself, for a caller that refreshes it (the stack, once a world is
// committed).
func Open(_ context.Context, in service.MCPInfra, c ServiceConfig) (*Server, error) {
	var facts []Fact
	if c.FactsFile != "" {
		data, err := os.ReadFile(c.FactsFile)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &facts); err != nil {
			return nil, fmt.Errorf("facts file: %w", err)
		}
	}
	o := Options{Options: in.Options, Graph: c.Graph, Facts: facts, RefreshInterval: c.Refresh}
	if in.Graph != nil {
		o.Graph, o.GraphConn = graphx.Settings{}, in.Graph
	}
	return New(o)
}
