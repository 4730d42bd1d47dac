// Package worldtools holds mcp-world's tools: get-location, list-exits,
// get-player-state, get-neighbors (graph reads through gremlin-go as the
// graph's read-only user, ReadOnlyStrategy on every traversal source),
// list-recent-events (direct gets on the COMMITTED JetStream stream, newest
// first; no consumer or other durable state is created) and
// get-recent-dialogue (the interaction memory bucket, which the
// memory-writer keeps from COMMITTED; read only).
package worldtools

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// Version of the server.
const Version = "1.0.0"

// Input limits.
const (
	MaxIDLen        = 128
	MaxDepth        = 3
	MaxLimit        = 50
	DefaultLimit    = 10
	DefaultMaxScan  = 2000
	DefaultStream   = "COMMITTED"
	maxNeighborhood = 200
)

// Options configure mcp-world.
type Options struct {
	mcpx.Options
	// Graph names the graph and its read-only credentials; or pass GraphConn.
	Graph     graphx.Settings
	GraphConn *graphx.Conn
	// JetStream reads the COMMITTED stream (nil: list-recent-events reports
	// that events are unavailable).
	JetStream jetstream.JetStream
	// Stream is the committed stream's name (default COMMITTED).
	Stream string
	// MaxScan bounds how many messages list-recent-events reads back from the
	// newest (default 2000).
	MaxScan int
}

// Server is mcp-world.
type Server struct {
	mcp    *mcp.Server
	opts   Options
	graph  *graphx.Conn
	memory *lazyMemory
}

// New builds mcp-world. Nothing is dialled until the first call.
func New(o Options) (*Server, error) {
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.MaxScan <= 0 {
		o.MaxScan = DefaultMaxScan
	}
	var srv *Server
	o.Completion = func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		return mcpx.EntityCompletion(srv.entityKinds()...)(ctx, req)
	}
	s, err := mcpx.NewServer("world", Version,
		"Read-only view of the canonical world graph and its committed event log. Entity ids are prefixed by kind: loc:, player:, npc:, item:.", o.Options)
	if err != nil {
		return nil, err
	}
	srv = &Server{mcp: s, opts: o, graph: o.GraphConn}
	srv.memory = &lazyMemory{s: srv}
	if srv.graph == nil {
		o.Graph.ReadOnly = true
		if srv.graph, err = graphx.Open(o.Graph); err != nil {
			return nil, fmt.Errorf("mcp-world reads the graph: %w", err)
		}
	}
	id := mcpx.StrLen(1, MaxIDLen)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "get-location",
		Description: "Get a location by id (loc:…): name, description, region, tags, version, its exits (direction, description, destination) and who/what is there (NPCs, players, items).",
		Annotations: mcpx.ReadOnly("Get location"),
		InputSchema: mcpx.InputSchema[LocationInput](map[string]mcpx.Limit{"locationId": id}),
	}, srv.getLocation)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "list-exits",
		Description: "List the exits of a location (loc:…): direction, description and destination id and name.",
		Annotations: mcpx.ReadOnly("List exits"),
		InputSchema: mcpx.InputSchema[LocationInput](map[string]mcpx.Limit{"locationId": id}),
	}, srv.listExits)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "get-player-state",
		Description: "Get a player by id (player:…): name, version, current location and inventory.",
		Annotations: mcpx.ReadOnly("Get player state"),
		InputSchema: mcpx.InputSchema[PlayerInput](map[string]mcpx.Limit{"playerId": id}),
	}, srv.getPlayerState)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "get-neighbors",
		Description: "List the locations reachable from a location through exits within depth steps (1..3, default 1), nearest first, each with its distance and the directions taken.",
		Annotations: mcpx.ReadOnly("Get neighbors"),
		InputSchema: mcpx.InputSchema[NeighborsInput](map[string]mcpx.Limit{"locationId": id, "depth": mcpx.IntRange(1, MaxDepth)}),
	}, srv.getNeighbors)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "list-recent-events",
		Description: "List the most recent committed domain events whose payload mentions an entity id (a location or player), newest first, at most limit (1..50, default 10).",
		Annotations: mcpx.ReadOnly("List recent events"),
		InputSchema: mcpx.InputSchema[RecentEventsInput](map[string]mcpx.Limit{"entityId": id, "limit": mcpx.IntRange(1, MaxLimit)}),
	}, srv.listRecentEvents)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "get-recent-dialogue",
		Description: "Get what an NPC (npc:…) and a player (player:…) said to each other recently: their last committed exchanges, newest first, at most limit (1..20, default 5), each with the player's words (personal data redacted) and the NPC's answer; and the NPC's most recent committed events with anyone. Empty when they have not spoken lately.",
		Annotations: mcpx.ReadOnly("Get recent dialogue"),
		InputSchema: mcpx.InputSchema[RecentDialogueInput](map[string]mcpx.Limit{"npcId": id, "playerId": id, "limit": mcpx.IntRange(1, MaxDialogueLimit)}),
	}, srv.getRecentDialogue)
	mcpx.AddEntityResources(s, srv.entityKinds()...)
	return srv, nil
}

// MCP returns the MCP server.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Graph returns the read-only graph connection.
func (s *Server) Graph() *graphx.Conn { return s.graph }

// Handler serves the MCP endpoint over Streamable HTTP (scope world:read).
func (s *Server) Handler() http.Handler {
	return s.opts.HTTPHandler(s.mcp, mcpx.ScopeWorldRead)
}

// Ready checks the graph answers (for /readyz).
func (s *Server) Ready(ctx context.Context) error { return s.graph.Ping(ctx) }

// Close releases the graph connection if New created it.
func (s *Server) Close() {
	if s.opts.GraphConn == nil {
		s.graph.Close()
	}
}

func checkID(field, v, prefix string) error {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return mcpx.InvalidInput("%s must not be blank", field)
	case len(v) > MaxIDLen:
		return mcpx.InvalidInput("%s is %d bytes; at most %d allowed", field, len(v), MaxIDLen)
	case prefix != "" && !strings.HasPrefix(v, prefix):
		return mcpx.InvalidInput("%s %q should start with %q", field, v, prefix)
	}
	return nil
}
