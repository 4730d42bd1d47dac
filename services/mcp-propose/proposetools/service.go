package proposetools

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// Program is mcp-propose's process: it publishes, so it needs NATS (user mcp-propose).
var Program = service.MCPProgram{Name: "mcp-propose", Listen: "127.0.0.1:7404", Admin: "127.0.0.1:9404", Scope: mcpx.ScopePropose,
	NATSRequired: true}

// ServiceConfig is mcp-propose's configuration: its flags (RegisterFlags), its process's argv
// (Args) and environment (Env).
type ServiceConfig struct {
	service.MCPProcess
	Routes     string
	StatusWait time.Duration
}

// DefaultServiceConfig is the configuration with every flag at its default.
func DefaultServiceConfig() ServiceConfig {
	return service.Defaults((*ServiceConfig).RegisterFlags)
}

// RegisterFlags registers mcp-propose's flags on fs, each with its default.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	Program.RegisterFlags(fs, &c.MCPProcess)
	fs.StringVar(&c.Routes, "routes", "", "routes file (default: the embedded routes); must be the gates' own")
	fs.DurationVar(&c.StatusWait, "status-wait", 5*time.Second, "how long proposal-status reads the outcomes at most")
}

// MCPProc is the process part of the configuration (service.MCPConfig).
func (c *ServiceConfig) MCPProc() *service.MCPProcess { return &c.MCPProcess }

// Args is the argv of an mcp-propose process with this configuration.
func (c ServiceConfig) Args() []string {
	return service.Args(DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Env is the same configuration as environment variables.
func (c ServiceConfig) Env() []string {
	return service.MCPEnv(DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Start builds mcp-propose on in, which must have NATS; it is ready while NATS is connected.
func Start(_ context.Context, in service.MCPInfra, c ServiceConfig) (*service.MCPServer, error) {
	if in.Conn == nil || in.JetStream == nil {
		return nil, errors.New("mcp-propose needs NATS (-nats-url): it publishes proposals")
	}
	routes, err := route.Load(c.Routes)
	if err != nil {
		return nil, err
	}
	srv, err := New(Options{Options: in.Options, JetStream: in.JetStream, Routes: &routes, StatusWait: c.StatusWait})
	if err != nil {
		return nil, err
	}
	nc := in.Conn
	return &service.MCPServer{MCP: srv.MCP(), Handler: srv.Handler(), Ready: func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("NATS: %s", nc.Status())
		}
		return nil
	}}, nil
}
