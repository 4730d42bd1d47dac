// Command mcp-classify serves Worldgate's read-only classification tools
// (classify-intent, moderate-content) over Streamable HTTP (at /mcp, bearer
// token with scope classify:read) or stdio (trusted local use, no token).
//
//	mcp-classify -listen :7403 -admin :9403 -token-file tokens.json
//	mcp-classify -transport stdio
//	WORLDGATE_MCP_JWT_SECRET=... mcp-classify issue-token -subject ai-worker -scopes classify:read
//
// The server itself is classifytools.Start (services/internal/service).
package main

import (
	"context"

	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
)

func main() {
	var cfg classifytools.ServiceConfig
	service.MainMCP(classifytools.Program, &cfg, func(ctx context.Context, in service.MCPInfra) (*service.MCPServer, error) {
		return classifytools.Start(ctx, in, cfg)
	})
}
