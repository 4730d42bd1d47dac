// Command mcp-lore serves Worldgate's read-only lore tools (search-lore,
// get-canonical-fact) over Streamable HTTP (at /mcp, bearer token with scope
// lore:read) or stdio (trusted local use, no token). Facts are LoreFact
// vertices read with the graph's read-only user, and/or a JSON facts file.
//
//	mcp-lore -graph-url ws://127.0.0.1:8182/gremlin -graph-user reader -graph-password reader-dev -token-file tokens.json
//	mcp-lore -transport stdio -facts facts.json
//
// The server itself is loretools.Start (services/internal/service).
package main

import (
	"context"

	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
)

func main() {
	var cfg loretools.ServiceConfig
	service.MainMCP(loretools.Program, &cfg, func(ctx context.Context, in service.MCPInfra) (*service.MCPServer, error) {
		return loretools.Start(ctx, in, cfg)
	})
}
