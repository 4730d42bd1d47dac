// Command mcp-world serves Worldgate's read-only world tools (get-location,
// list-exits, get-player-state, get-neighbors, list-recent-events,
// get-recent-dialogue) over Streamable HTTP (at /mcp, bearer token with scope
// world:read) or stdio (trusted local use, no token). It reads the graph as
// the read-only user, and the COMMITTED JetStream stream and the interaction
// memory bucket with direct gets.
//
//	mcp-world -graph-url ws://127.0.0.1:8182/gremlin -graph-user reader -graph-password reader-dev \
//	          -nats-url nats://127.0.0.1:4222 -token-file tokens.json
//
// The server itself is worldtools.Start (services/internal/service).
package main

import (
	"context"

	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
)

func main() {
	var cfg worldtools.ServiceConfig
	service.MainMCP(worldtools.Program, &cfg, func(ctx context.Context, in service.MCPInfra) (*service.MCPServer, error) {
		return worldtools.Start(ctx, in, cfg)
	})
}
