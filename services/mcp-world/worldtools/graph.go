package worldtools

import (
	"context"
	"fmt"
	"sort"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// LocationInput names a location.
type LocationInput struct {
	LocationID string `json:"locationId" jsonschema:"location id, e.g. loc:market-square"`
}

// PlayerInput names a player.
type PlayerInput struct {
	PlayerID string `json:"playerId" jsonschema:"player id, e.g. player:ada"`
}

// NeighborsInput is get-neighbors' input.
type NeighborsInput struct {
	LocationID string `json:"locationId" jsonschema:"location id, e.g. loc:market-square"`
	Depth      int    `json:"depth,omitempty" jsonschema:"how many exits away, 1..3 (default 1)"`
}

// Exit is an exit edge.
type Exit struct {
	Direction   string `json:"direction"`
	Description string `json:"description,omitempty"`
	To          string `json:"to" jsonschema:"destination location id"`
	ToName      string `json:"toName,omitempty"`
}

// Ref is a named entity.
type Ref struct {
	ID   string `json:"id"`
	Kind string `json:"kind" jsonschema:"vertex label: NPC, Player, Item, Location…"`
	Name string `json:"name,omitempty"`
}

// Location is get-location's output.
type Location struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Region      string   `json:"region,omitempty"`
	Tags        []string `json:"tags"`
	Version     int64    `json:"version"`
	Exits       []Exit   `json:"exits"`
	Occupants   []Ref    `json:"occupants" jsonschema:"NPCs, players and items at the location"`
}

// ExitsOutput is list-exits' output.
type ExitsOutput struct {
	LocationID string `json:"locationId"`
	Exits      []Exit `json:"exits"`
}

// PlayerState is get-player-state's output.
type PlayerState struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Version   int64  `json:"version"`
	Location  *Ref   `json:"location" jsonschema:"where the player is; null if nowhere"`
	Inventory []Ref  `json:"inventory"`
}

// Neighbor is a reachable location.
type Neighbor struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Distance int      `json:"distance"`
	Path     []string `json:"path" jsonschema:"directions taken from the start"`
}

// NeighborsOutput is get-neighbors' output.
type NeighborsOutput struct {
	LocationID string     `json:"locationId"`
	Depth      int        `json:"depth"`
	Neighbors  []Neighbor `json:"neighbors"`
}

func (s *Server) list(ctx context.Context, build func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal) ([]graphx.Props, error) {
	res, err := s.graph.Submit(ctx, build)
	if err != nil {
		return nil, fmt.Errorf("graph read failed: %w", err)
	}
	out := make([]graphx.Props, 0, len(res))
	for _, r := range res {
		if p, ok := graphx.AsProps(r); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// vertex reads one vertex with the given label; nil if absent.
func (s *Server) vertex(ctx context.Context, id, label string) (graphx.Props, error) {
	vs, err := s.list(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V(id).HasLabel(label).ElementMap()
	})
	if err != nil || len(vs) == 0 {
		return nil, err
	}
	return vs[0], nil
}

// names reads the name of each id.
func (s *Server) names(ctx context.Context, ids []string) (map[string]graphx.Props, error) {
	out := map[string]graphx.Props{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	vs, err := s.list(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V(args...).ElementMap("name")
	})
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		out[v.String("id")] = v
	}
	return out, nil
}

// exitsFrom reads the exit edges of the given locations.
func (s *Server) exitsFrom(ctx context.Context, ids ...string) (map[string][]Exit, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	es, err := s.list(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V(args...).OutE("exit").ElementMap()
	})
	if err != nil {
		return nil, err
	}
	out := map[string][]Exit{}
	for _, e := range es {
		from := e.Ref("OUT")
		out[from] = append(out[from], Exit{Direction: e.String("direction"), Description: e.String("description"), To: e.Ref("IN")})
	}
	for k := range out {
		sort.Slice(out[k], func(i, j int) bool { return out[k][i].Direction < out[k][j].Direction })
	}
	return out, nil
}

func (s *Server) namedExits(ctx context.Context, id string) ([]Exit, error) {
	m, err := s.exitsFrom(ctx, id)
	if err != nil {
		return nil, err
	}
	exits := m[id]
	var to []string
	for _, e := range exits {
		to = append(to, e.To)
	}
	names, err := s.names(ctx, to)
	if err != nil {
		return nil, err
	}
	for i := range exits {
		exits[i].ToName = names[exits[i].To].String("name")
	}
	if exits == nil {
		exits = []Exit{}
	}
	return exits, nil
}

func (s *Server) getLocation(ctx context.Context, _ *mcp.CallToolRequest, in LocationInput) (*mcp.CallToolResult, Location, error) {
	if err := checkID("locationId", in.LocationID, "loc:"); err != nil {
		return nil, Location{}, err
	}
	v, err := s.vertex(ctx, in.LocationID, "Location")
	if err != nil {
		return nil, Location{}, err
	}
	if v == nil {
		return nil, Location{}, mcpx.NotFound("no location with id %q", in.LocationID)
	}
	exits, err := s.namedExits(ctx, in.LocationID)
	if err != nil {
		return nil, Location{}, err
	}
	occ, err := s.list(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V(in.LocationID).In("at").ElementMap("name")
	})
	if err != nil {
		return nil, Location{}, err
	}
	loc := Location{
		ID: in.LocationID, Name: v.String("name"), Description: v.String("description"), Region: v.String("region"),
		Tags: v.Strings("tags"), Version: v.Int("version"), Exits: exits, Occupants: refs(occ),
	}
	return nil, loc, nil
}

func refs(ps []graphx.Props) []Ref {
	out := make([]Ref, 0, len(ps))
	for _, p := range ps {
		out = append(out, Ref{ID: p.String("id"), Kind: p.String("label"), Name: p.String("name")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *Server) listExits(ctx context.Context, _ *mcp.CallToolRequest, in LocationInput) (*mcp.CallToolResult, ExitsOutput, error) {
	if err := checkID("locationId", in.LocationID, "loc:"); err != nil {
		return nil, ExitsOutput{}, err
	}
	v, err := s.vertex(ctx, in.LocationID, "Location")
	if err != nil {
		return nil, ExitsOutput{}, err
	}
	if v == nil {
		return nil, ExitsOutput{}, mcpx.NotFound("no location with id %q", in.LocationID)
	}
	exits, err := s.namedExits(ctx, in.LocationID)
	if err != nil {
		return nil, ExitsOutput{}, err
	}
	return nil, ExitsOutput{LocationID: in.LocationID, Exits: exits}, nil
}

func (s *Server) getPlayerState(ctx context.Context, _ *mcp.CallToolRequest, in PlayerInput) (*mcp.CallToolResult, PlayerState, error) {
	if err := checkID("playerId", in.PlayerID, "player:"); err != nil {
		return nil, PlayerState{}, err
	}
	v, err := s.vertex(ctx, in.PlayerID, "Player")
	if err != nil {
		return nil, PlayerState{}, err
	}
	if v == nil {
		return nil, PlayerState{}, mcpx.NotFound("no player with id %q", in.PlayerID)
	}
	at, err := s.list(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V(in.PlayerID).Out("at").ElementMap("name")
	})
	if err != nil {
		return nil, PlayerState{}, err
	}
	holds, err := s.list(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V(in.PlayerID).Out("holds").ElementMap("name")
	})
	if err != nil {
		return nil, PlayerState{}, err
	}
	ps := PlayerState{ID: in.PlayerID, Name: v.String("name"), Version: v.Int("version"), Inventory: refs(holds)}
	if r := refs(at); len(r) > 0 {
		ps.Location = &r[0]
	}
	return nil, ps, nil
}

func (s *Server) getNeighbors(ctx context.Context, _ *mcp.CallToolRequest, in NeighborsInput) (*mcp.CallToolResult, NeighborsOutput, error) {
	if err := checkID("locationId", in.LocationID, "loc:"); err != nil {
		return nil, NeighborsOutput{}, err
	}
	depth := in.Depth
	if depth == 0 {
		depth = 1
	}
	if depth < 1 || depth > MaxDepth {
		return nil, NeighborsOutput{}, mcpx.InvalidInput("depth is %d; it must be between 1 and %d", in.Depth, MaxDepth)
	}
	v, err := s.vertex(ctx, in.LocationID, "Location")
	if err != nil {
		return nil, NeighborsOutput{}, err
	}
	if v == nil {
		return nil, NeighborsOutput{}, mcpx.NotFound("no location with id %q", in.LocationID)
	}
	// Breadth-first, one traversal per level.
	paths := map[string][]string{in.LocationID: {}}
	frontier := []string{in.LocationID}
	var found []Neighbor
	for d := 1; d <= depth && len(frontier) > 0 && len(found) < maxNeighborhood; d++ {
		exits, err := s.exitsFrom(ctx, frontier...)
		if err != nil {
			return nil, NeighborsOutput{}, err
		}
		var next []string
		for _, from := range frontier {
			for _, e := range exits[from] {
				if _, seen := paths[e.To]; seen {
					continue
				}
				p := append(append([]string{}, paths[from]...), e.Direction)
				paths[e.To] = p
				next = append(next, e.To)
				found = append(found, Neighbor{ID: e.To, Distance: d, Path: p})
			}
		}
		frontier = next
	}
	if len(found) > maxNeighborhood {
		found = found[:maxNeighborhood]
	}
	ids := make([]string, len(found))
	for i, n := range found {
		ids[i] = n.ID
	}
	names, err := s.names(ctx, ids)
	if err != nil {
		return nil, NeighborsOutput{}, err
	}
	for i := range found {
		found[i].Name = names[found[i].ID].String("name")
	}
	if found == nil {
		found = []Neighbor{}
	}
	return nil, NeighborsOutput{LocationID: in.LocationID, Depth: depth, Neighbors: found}, nil
}
