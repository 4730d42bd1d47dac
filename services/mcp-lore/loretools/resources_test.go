package loretools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
)

// TestLoreFactsAsResourcesWithCompletion: the official client lists the template, reads a
// fact by URI, gets resource-not-found for an unknown one and completes fact names.
func TestLoreFactsAsResourcesWithCompletion(t *testing.T) {
	srv, err := loretools.New(loretools.Options{Facts: facts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	go func() { _ = srv.MCP().Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// Logging is deprecated (SEP-2577); shared/mcpx still advertises it through the deprecation window.
	if caps := cs.InitializeResult().Capabilities; caps.Resources == nil || caps.Completions == nil || caps.Logging == nil { //nolint:staticcheck // SA1019: see above
		t.Fatalf("capabilities %+v: want resources, completions and logging", caps)
	}
	tl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tl.ResourceTemplates) != 1 || tl.ResourceTemplates[0].URITemplate != "worldgate://lore/{name}" {
		t.Fatalf("templates %+v %v", tl, err)
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "worldgate://lore/goose"})
	if err != nil {
		t.Fatal(err)
	}
	var f loretools.Fact
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &f); err != nil || f.Title != "The Gilded Goose" || res.Contents[0].MIMEType != "application/json" {
		t.Fatalf("read %+v: %v", res.Contents[0], err)
	}
	for _, bad := range []string{"worldgate://lore/nothing", "worldgate://lore/a/b", "worldgate://npcs/goose"} {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: bad}); err == nil || !strings.Contains(strings.ToLower(err.Error()), "not found") {
			t.Errorf("read %s: %v, want resource not found", bad, err)
		}
	}
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "worldgate://lore/{name}"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "B"}})
	if err != nil || strings.Join(comp.Completion.Values, ",") != "bridge" || comp.Completion.Total != 1 {
		t.Fatalf("complete B: %+v %v", comp, err)
	}
	comp, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "worldgate://lore/{name}"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: ""}})
	if err != nil || strings.Join(comp.Completion.Values, ",") != "bridge,goose,lantern,sundering" {
		t.Fatalf("complete all: %+v %v", comp, err)
	}
}
