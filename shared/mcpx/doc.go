// Package mcpx holds the world-agnostic foundation of Worldgate's MCP tool
// servers: bearer-token authentication with scopes, per-token rate limits,
// metrics and correlation-id logging applied once around every tool call, and
// helpers that serve an *mcp.Server over Streamable HTTP or stdio.
package mcpx

import _ "github.com/modelcontextprotocol/go-sdk/mcp"
