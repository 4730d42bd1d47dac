package worldtools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// TestEntitiesAsResourcesWithCompletion: over Streamable HTTP with a token, the official client
// sees the location, NPC and faction templates, reads a location and an NPC from the graph,
// gets resource-not-found for an absent one and completes location names by prefix.
func TestEntitiesAsResourcesWithCompletion(t *testing.T) {
	e := setup(t, mcpx.RateLimit{})
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: e.url, HTTPClient: &http.Client{Transport: auth{token}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, rt := range tl.ResourceTemplates {
		uris = append(uris, rt.URITemplate)
	}
	if strings.Join(uris, " ") != "worldgate://factions/{name} worldgate://locations/{name} worldgate://npcs/{name}" {
		t.Fatalf("templates %v", uris)
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "worldgate://locations/square"})
	if err != nil {
		t.Fatal(err)
	}
	var loc worldtools.Location
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &loc); err != nil || loc.ID != "loc:square" || len(loc.Occupants) == 0 {
		t.Fatalf("location %s: %v", res.Contents[0].Text, err)
	}
	res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "worldgate://npcs/mira"})
	if err != nil || !strings.Contains(res.Contents[0].Text, `"name":"Mira"`) {
		t.Fatalf("npc: %v %+v", err, res)
	}
	for _, bad := range []string{"worldgate://locations/nowhere", "worldgate://npcs/square", "worldgate://locations/"} {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: bad}); err == nil || !strings.Contains(strings.ToLower(err.Error()), "not found") {
			t.Errorf("read %s: %v, want resource not found", bad, err)
		}
	}
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "worldgate://locations/{name}"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "sq"}})
	if err != nil || strings.Join(comp.Completion.Values, ",") != "square" {
		t.Fatalf("complete sq: %+v %v", comp, err)
	}
	comp, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "worldgate://npcs/{name}"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "npc:M"}})
	if err != nil || strings.Join(comp.Completion.Values, ",") != "mira" {
		t.Fatalf("complete npc:M: %+v %v", comp, err)
	}
}
