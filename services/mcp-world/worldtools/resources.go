package worldtools

import (
	"context"
	"errors"
	"fmt"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// entityKinds are the world's entities published as resources:
// worldgate://locations/{name}, worldgate://npcs/{name}, worldgate://factions/{name}.
func (s *Server) entityKinds() []mcpx.EntityKind {
	vertex := func(label string) func(ctx context.Context, id string) (any, error) {
		return func(ctx context.Context, id string) (any, error) {
			v, err := s.vertex(ctx, id, label)
			if err != nil || v == nil {
				return nil, err
			}
			return map[string]any(v), nil
		}
	}
	return []mcpx.EntityKind{
		{Collection: "locations", Prefix: "loc:", Title: "Location", Description: "A location as get-location returns it: name, description, region, tags, exits and occupants.",
			Read: func(ctx context.Context, id string) (any, error) {
				_, loc, err := s.getLocation(ctx, nil, LocationInput{LocationID: id})
				var nf *mcpx.NotFoundError
				var inv *mcpx.InvalidInputError
				if errors.As(err, &nf) || errors.As(err, &inv) {
					return nil, nil
				}
				if err != nil {
					return nil, err
				}
				return loc, nil
			}, IDs: s.ids("Location")},
		{Collection: "npcs", Prefix: "npc:", Title: "NPC", Description: "A non-player character's properties.", Read: vertex("NPC"), IDs: s.ids("NPC")},
		{Collection: "factions", Prefix: "faction:", Title: "Faction", Description: "A faction's properties.", Read: vertex("Faction"), IDs: s.ids("Faction")},
	}
}

// ids lists the ids of the vertices with label, at most limit.
func (s *Server) ids(label string) func(ctx context.Context, limit int) ([]string, error) {
	return func(ctx context.Context, limit int) ([]string, error) {
		res, err := s.graph.Submit(ctx, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
			return g.V().HasLabel(label).Id().Limit(limit)
		})
		if err != nil {
			return nil, fmt.Errorf("graph read failed: %w", err)
		}
		out := make([]string, 0, len(res))
		for _, r := range res {
			if id, ok := r.(string); ok {
				out = append(out, id)
			}
		}
		return out, nil
	}
}
