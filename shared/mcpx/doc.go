// Package mcpx holds the world-agnostic foundation of Worldgate's MCP tool
// servers: authorization to the MCP specification (bearer access tokens
// checked with go-jose against an issuer's JWKS or the dev mode's static
// keys, scopes, RFC 9728 protected-resource metadata), transport hardening
// (Origin allow-list, JSON-RPC answers to malformed input and unknown methods
// on HTTP and stdio), per-client rate limits, metrics and correlation-id
// logging applied once around every tool call, and helpers that serve an
// *mcp.Server over Streamable HTTP or stdio. Package issuer is the small
// OAuth authorization server `worldgate dev` runs.
//
// The hops are as cheap as their caller allows: Worldgate's own client
// (package client) keeps one session and its connections per server, asks for
// plain JSON answers (ResponseHeader) since no call of its needs a stream, and
// calls a server of its own process through the SDK's in-memory transport
// (client.ServerConfig.InProcess); every other client gets the resumable SSE
// streams the transport specifies, which the conformance suite checks.
package mcpx

import _ "github.com/modelcontextprotocol/go-sdk/mcp"
