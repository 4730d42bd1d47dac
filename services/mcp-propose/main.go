// Command mcp-propose serves Worldgate's proposal tools for outside narrators
// (propose-dialogue-line, propose-quest-seed, propose-ambience, enqueue-world-event,
// proposal-status) over Streamable HTTP (at /mcp, bearer token with scope propose, separate
// from the read-only servers' scopes) or stdio (trusted local use, no token). Nothing is
// written to the world here: proposals go through the gates as the narrator emitter, on
// proposals.emit.narrator, the only proposal subject its NATS user (mcp-propose) may publish to.
//
//	mcp-propose -nats-url nats://127.0.0.1:4222 -nats-user mcp-propose -nats-password … \
//	            -issuer https://auth.example.com -resource https://mcp-propose.example.com/mcp
//
// The server itself is proposetools.Start (services/internal/service).
package main

import (
	"context"

	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/services/mcp-propose/proposetools"
)

func main() {
	var cfg proposetools.ServiceConfig
	service.MainMCP(proposetools.Program, &cfg, func(ctx context.Context, in service.MCPInfra) (*service.MCPServer, error) {
		return proposetools.Start(ctx, in, cfg)
	})
}
