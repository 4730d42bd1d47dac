package loretools_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
)

const token = "lore-test-token-0000000001"

var facts = []loretools.Fact{
	{ID: "lore:sundering", Title: "The Sundering", Text: "Three hundred years ago the river god split the valley in two, drowning the old capital beneath the lake.", Tags: []string{"history", "river"}, Canonical: true},
	{ID: "lore:goose", Title: "The Gilded Goose", Text: "The tavern in the market square is famous for its honey ale and its gossiping owner Mira.", Tags: []string{"tavern", "town"}, Canonical: true},
	{ID: "lore:bridge", Title: "The Old Bridge", Text: "The old bridge north of the gate was built by dwarves after the Sundering; trolls are rumoured to live beneath it.", Tags: []string{"bridge", "rumour"}, Canonical: false},
	{ID: "lore:lantern", Title: "Brass Lanterns", Text: "Brass lanterns are made in the foundries of the east and burn whale oil.", Tags: []string{"item"}, Canonical: true},
}

func newClient(t *testing.T, o loretools.Options) *client.Client {
	t.Helper()
	o.Auth = mcpx.AuthConfig{StaticTokens: map[string]mcpx.Principal{token: {Subject: "ai-worker", Scopes: []string{mcpx.ScopeLoreRead}}}}
	srv, err := loretools.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	c, err := client.New(context.Background(), client.Config{Servers: []client.ServerConfig{{Name: "lore", URL: ts.URL, Token: token}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func search(t *testing.T, c *client.Client, args map[string]any) loretools.SearchLoreOutput {
	t.Helper()
	res, err := c.Call(context.Background(), "search-lore", args)
	if err != nil {
		t.Fatal(err)
	}
	var out loretools.SearchLoreOutput
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSearchAndCanonicalFactsFromDirectFacts(t *testing.T) {
	c := newClient(t, loretools.Options{Facts: facts})
	ctx := context.Background()

	out := search(t, c, map[string]any{"query": "who lives under the bridge", "k": 2})
	if len(out.Hits) == 0 || out.Hits[0].ID != "lore:bridge" || out.IndexedFacts != 4 {
		t.Fatalf("bridge search = %+v", out)
	}
	out = search(t, c, map[string]any{"query": "river god drowned capital"})
	if len(out.Hits) == 0 || out.Hits[0].ID != "lore:sundering" || out.Hits[0].Score <= 0 {
		t.Fatalf("sundering search = %+v", out)
	}
	for i := 1; i < len(out.Hits); i++ {
		if out.Hits[i].Score > out.Hits[i-1].Score {
			t.Fatalf("not ranked: %+v", out.Hits)
		}
	}
	out = search(t, c, map[string]any{"query": "sundering", "canonicalOnly": true})
	for _, h := range out.Hits {
		if !h.Canonical {
			t.Fatalf("non-canonical hit %s", h.ID)
		}
	}
	out = search(t, c, map[string]any{"query": "tavern ale", "tags": []string{"town"}})
	if len(out.Hits) != 1 || out.Hits[0].ID != "lore:goose" {
		t.Fatalf("tag filter = %+v", out)
	}
	out = search(t, c, map[string]any{"query": "spaceship laser"})
	if len(out.Hits) != 0 {
		t.Fatalf("nonsense query hits %+v", out.Hits)
	}

	get := func(args map[string]any) (loretools.GetCanonicalFactOutput, error) {
		res, err := c.Call(ctx, "get-canonical-fact", args)
		var out loretools.GetCanonicalFactOutput
		if err == nil {
			err = res.Decode(&out)
		}
		return out, err
	}
	if f, err := get(map[string]any{"factId": "lore:goose"}); err != nil || f.Fact.Title != "The Gilded Goose" || f.MatchedBy != "id" {
		t.Fatalf("by id: %+v %v", f, err)
	}
	if f, err := get(map[string]any{"topic": "the sundering"}); err != nil || f.Fact.ID != "lore:sundering" || f.MatchedBy != "title" {
		t.Fatalf("by title: %+v %v", f, err)
	}
	if f, err := get(map[string]any{"topic": "whale oil"}); err != nil || f.Fact.ID != "lore:lantern" || f.MatchedBy != "search" {
		t.Fatalf("by search: %+v %v", f, err)
	}
	for _, bad := range []struct {
		tool string
		args any
		want string
	}{
		// A bare string (the ai-worker's scripted provider sent these by the dozen): a sentence
		// saying what to send, not "cannot unmarshal".
		{"get-canonical-fact", "The Sundering", `the arguments of get-canonical-fact must be a JSON object naming each argument (as its input schema shows), not a string: ` + loretools.CanonicalFactShape},
		{"get-canonical-fact", []string{"lore:goose"}, "not an array: give exactly one of factId"},
		{"get-canonical-fact", map[string]any{"factId": "lore:goose", "topic": "x"}, loretools.CanonicalFactShape},
		{"get-canonical-fact", map[string]any{"topic": "   "}, loretools.CanonicalFactShape},
		{"get-canonical-fact", map[string]any{"factId": "lore:nothing"}, `no lore fact with id "lore:nothing"`},
		{"get-canonical-fact", map[string]any{"factId": "lore:bridge"}, "not canonical"},
		{"get-canonical-fact", map[string]any{"topic": "spaceship laser"}, `no canonical lore fact matches topic "spaceship laser"`},
		{"get-canonical-fact", map[string]any{}, "oneOf: did not validate against any of [anchor factId-alone anchor topic-alone]"},
		{"get-canonical-fact", map[string]any{"factId": "lore:goose", "topic": "x"}, "oneOf: validated against both anchor factId-alone and anchor topic-alone"},
		{"get-canonical-fact", map[string]any{"factId": ""}, "minLength"},
		{"get-canonical-fact", map[string]any{"factId": nil}, `argument "factId" is null`},
		{"get-canonical-fact", map[string]any{"topic": strings.Repeat("t", 201)}, "maxLength"},
		{"search-lore", map[string]any{"query": ""}, "minLength"},
		{"search-lore", map[string]any{"query": strings.Repeat("q", 501)}, "maxLength"},
		{"search-lore", map[string]any{"query": "x", "k": 11}, "maximum"},
		{"search-lore", map[string]any{"query": "x", "k": 0}, "minimum"},
		{"search-lore", map[string]any{"query": "x", "tags": []string{"a", "b", "c", "d", "e", "f"}}, "at most 5"},
	} {
		_, err := c.Call(ctx, bad.tool, bad.args)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Kind != client.KindToolError || !strings.Contains(ce.Message, bad.want) {
			t.Errorf("%s %v: %v, want a tool error containing %q", bad.tool, bad.args, err, bad.want)
		}
	}
}

func TestFactsFromGraph(t *testing.T) {
	gs := graphdtest.Start(t)
	g := graphdtest.Writer(t, gs.URL())
	for _, f := range facts {
		if err := <-g.AddV("LoreFact").Property(gremlingo.T.Id, f.ID).Property("title", f.Title).Property("text", f.Text).
			Property("tags", toAny(f.Tags)).Property("canonical", f.Canonical).Iterate(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-g.AddV("Location").Property(gremlingo.T.Id, "loc:bridge").Property("name", "Old Bridge").Iterate(); err != nil {
		t.Fatal(err)
	}
	if err := <-g.V("lore:bridge").AddE("about").To(gremlingo.T__.V("loc:bridge")).Iterate(); err != nil {
		t.Fatal(err)
	}
	extra := loretools.Fact{ID: "lore:extra", Title: "Passed In", Text: "A fact passed in directly about griffins.", Canonical: true}
	c := newClient(t, loretools.Options{
		Graph: graphx.Settings{ReadOnly: true, URL: gs.URL(), Username: graphdtest.ReaderUser, Password: graphdtest.ReaderPassword},
		Facts: []loretools.Fact{extra},
	})
	out := search(t, c, map[string]any{"query": "trolls beneath the bridge"})
	if out.IndexedFacts != 5 || len(out.Hits) == 0 || out.Hits[0].ID != "lore:bridge" ||
		strings.Join(out.Hits[0].Tags, ",") != "bridge,rumour" || strings.Join(out.Hits[0].About, ",") != "loc:bridge" {
		t.Fatalf("graph search = %+v", out)
	}
	out = search(t, c, map[string]any{"query": "griffins"})
	if len(out.Hits) != 1 || out.Hits[0].ID != "lore:extra" {
		t.Fatalf("direct fact = %+v", out)
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
