package scripted_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/scripted"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
)

// The scripted provider's get-canonical-fact calls, made from the real mcp-lore tool's input
// schema as the agent offers it (through the MCP client), are answered: by topic when the
// prompt has no fact id, by factId when it has one. Its arguments used to be a bare string
// (the schema's oneOf alternatives carry an $anchor, which the argument maker did not
// recognise), refused by the dozen in `worldgate dev`.
func TestScriptedCanonicalFactCallsAreAnswered(t *testing.T) {
	const token = "scripted-lore-test-token-0001"
	srv, err := loretools.New(loretools.Options{
		Options: mcpx.Options{Auth: mcpx.AuthConfig{StaticTokens: map[string]mcpx.Principal{token: {Subject: "ai-worker", Scopes: []string{mcpx.ScopeLoreRead}}}}},
		Facts: []loretools.Fact{
			{ID: "lore:forge-row", Title: "Forge Row", Text: "The smiths of Forge Row have kept the old furnaces burning since the Sundering.", Canonical: true},
			{ID: "lore:sundering", Title: "The Sundering", Text: "Three hundred years ago the river god split the valley in two.", Canonical: true},
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	ctx := context.Background()
	mc, err := client.New(ctx, client.Config{Servers: []client.ServerConfig{{Name: "lore", URL: ts.URL, Token: token}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Close() })
	offered := mc.Tools([]string{loretools.ToolCanonicalFact})
	if len(offered) != 1 {
		t.Fatalf("offered %+v, want get-canonical-fact", offered)
	}
	tools := []llm.Tool{{Name: offered[0].Name, Description: offered[0].Description, InputSchema: offered[0].InputSchema}}

	for _, c := range []struct{ prompt, by, fact string }{
		{`Describe locationId: "loc:forge-row".`, "search", "lore:forge-row"},
		{`Tell the lore of factId: "lore:sundering".`, "id", "lore:sundering"},
	} {
		resp, err := scripted.New(scripted.Options{}).Complete(ctx, &llm.Request{Purpose: roles.PurposeAmbience,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: c.prompt}}, Tools: tools})
		if err != nil || len(resp.ToolCalls) != 1 {
			t.Fatalf("%s: %v %+v", c.prompt, err, resp)
		}
		args := resp.ToolCalls[0].Args
		res, err := mc.Call(ctx, resp.ToolCalls[0].Name, args)
		if err != nil {
			t.Fatalf("%s: get-canonical-fact %s: %v", c.prompt, args, err)
		}
		var out loretools.GetCanonicalFactOutput
		if err := res.Decode(&out); err != nil {
			t.Fatal(err)
		}
		if out.Fact.ID != c.fact || (c.by == "id") != (out.MatchedBy == "id") {
			t.Errorf("%s: args %s found %s by %s, want %s by %s", c.prompt, args, out.Fact.ID, out.MatchedBy, c.fact, c.by)
		}
		var sent map[string]any
		if json.Unmarshal(args, &sent) != nil || len(sent) != 1 {
			t.Errorf("%s: args %s, want an object with one of factId and topic", c.prompt, args)
		}
	}
}
