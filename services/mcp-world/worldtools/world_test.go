package worldtools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/natsx"
)

const token = "world-test-token-00000001"

var __ = gremlingo.T__

// seedWorld writes a small world through gremlin-go as the writer.
func seedWorld(t testing.TB, url string) {
	t.Helper()
	g := graphdtest.Writer(t, url)
	must := func(tr *gremlingo.GraphTraversal) {
		t.Helper()
		if err := <-tr.Iterate(); err != nil {
			t.Fatal(err)
		}
	}
	locs := []struct{ id, name, desc string }{
		{"loc:square", "Market Square", "Stalls crowd the cobbles."},
		{"loc:gate", "North Gate", "A weathered gate."},
		{"loc:road", "King's Road", "A muddy road."},
		{"loc:bridge", "Old Bridge", "Moss-covered stones."},
		{"loc:tavern", "The Gilded Goose", "Warm and loud."},
	}
	for i, l := range locs {
		must(g.AddV("Location").Property(gremlingo.T.Id, l.id).Property("name", l.name).Property("description", l.desc).
			Property("region", "riverlands").Property("tags", []any{"town", fmt.Sprintf("t%d", i)}).Property("version", int64(i+1)))
	}
	exits := []struct{ from, to, dir string }{
		{"loc:square", "loc:gate", "north"}, {"loc:gate", "loc:square", "south"},
		{"loc:square", "loc:tavern", "east"}, {"loc:tavern", "loc:square", "west"},
		{"loc:gate", "loc:road", "north"}, {"loc:road", "loc:bridge", "north"},
	}
	for _, e := range exits {
		must(g.V(e.from).AddE("exit").To(__.V(e.to)).Property("direction", e.dir).Property("description", "a path "+e.dir))
	}
	must(g.AddV("NPC").Property(gremlingo.T.Id, "npc:mira").Property("name", "Mira").Property("persona", "merchant").Property("mood", "cheerful").Property("version", int64(1)))
	must(g.AddV("Player").Property(gremlingo.T.Id, "player:ada").Property("name", "Ada").Property("version", int64(7)))
	must(g.AddV("Item").Property(gremlingo.T.Id, "item:lantern").Property("name", "Brass Lantern").Property("description", "Dented."))
	must(g.V("npc:mira").AddE("at").To(__.V("loc:square")))
	must(g.V("player:ada").AddE("at").To(__.V("loc:square")))
	must(g.V("player:ada").AddE("holds").To(__.V("item:lantern")))
}

func startNATS(t testing.TB) jetstream.JetStream {
	t.Helper()
	ns, err := natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

type env struct {
	url   string
	graph string
	js    jetstream.JetStream
	srv   *worldtools.Server
}

func setup(t testing.TB, rl mcpx.RateLimit) *env {
	t.Helper()
	gs := graphdtest.Start(t)
	seedWorld(t, gs.URL())
	js := startNATS(t)
	srv, err := worldtools.New(worldtools.Options{
		Options: mcpx.Options{
			Auth: mcpx.AuthConfig{StaticTokens: map[string]mcpx.Principal{
				token:                       {Subject: "ai-worker", Scopes: []string{mcpx.ScopeWorldRead}},
				"lore-only-token-000000001": {Subject: "lore", Scopes: []string{mcpx.ScopeLoreRead}},
			}},
			RateLimit: rl,
		},
		Graph:     graphx.Settings{ReadOnly: true, URL: gs.URL(), Username: graphdtest.ReaderUser, Password: graphdtest.ReaderPassword},
		JetStream: js,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &env{url: ts.URL, graph: gs.URL(), js: js, srv: srv}
}

type auth struct{ tok string }

func (a auth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.tok)
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t testing.TB, url, tok string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: auth{tok}}, DisableStandaloneSSE: true}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any, out any) (text string, isErr bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if len(res.Content) > 0 {
		text = res.Content[0].(*mcp.TextContent).Text
	}
	if !res.IsError && out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
		if !json.Valid([]byte(text)) {
			t.Fatalf("%s: text copy is not the JSON: %q", tool, text)
		}
	}
	return text, res.IsError
}

func TestWorldTools(t *testing.T) {
	e := setup(t, mcpx.RateLimit{})
	cs, err := connect(t, e.url, token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Catalog: six read-only tools.
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
		if tl.Annotations == nil || !tl.Annotations.ReadOnlyHint || tl.OutputSchema == nil {
			t.Errorf("%s: not annotated read-only or no output schema", tl.Name)
		}
	}
	sort.Strings(names)
	if want := []string{"get-location", "get-neighbors", "get-player-state", "get-recent-dialogue", "list-exits", "list-recent-events"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	var loc worldtools.Location
	call(t, cs, "get-location", map[string]any{"locationId": "loc:square"}, &loc)
	if loc.Name != "Market Square" || loc.Region != "riverlands" || loc.Version != 1 || !slices.Equal(loc.Tags, []string{"town", "t0"}) {
		t.Fatalf("location = %+v", loc)
	}
	if len(loc.Exits) != 2 || loc.Exits[0] != (worldtools.Exit{Direction: "east", Description: "a path east", To: "loc:tavern", ToName: "The Gilded Goose"}) || loc.Exits[1].To != "loc:gate" {
		t.Fatalf("exits = %+v", loc.Exits)
	}
	if len(loc.Occupants) != 2 || loc.Occupants[0] != (worldtools.Ref{ID: "npc:mira", Kind: "NPC", Name: "Mira"}) || loc.Occupants[1].ID != "player:ada" {
		t.Fatalf("occupants = %+v", loc.Occupants)
	}

	var ex worldtools.ExitsOutput
	call(t, cs, "list-exits", map[string]any{"locationId": "loc:gate"}, &ex)
	if len(ex.Exits) != 2 || ex.Exits[0].Direction != "north" || ex.Exits[0].ToName != "King's Road" || ex.Exits[1].To != "loc:square" {
		t.Fatalf("exits = %+v", ex)
	}
	call(t, cs, "list-exits", map[string]any{"locationId": "loc:bridge"}, &ex)
	if len(ex.Exits) != 0 {
		t.Fatalf("bridge exits = %+v", ex)
	}

	var ps worldtools.PlayerState
	call(t, cs, "get-player-state", map[string]any{"playerId": "player:ada"}, &ps)
	if ps.Name != "Ada" || ps.Version != 7 || ps.Location == nil || ps.Location.ID != "loc:square" || ps.Location.Name != "Market Square" ||
		len(ps.Inventory) != 1 || ps.Inventory[0].Name != "Brass Lantern" {
		t.Fatalf("player = %+v", ps)
	}

	var nb worldtools.NeighborsOutput
	call(t, cs, "get-neighbors", map[string]any{"locationId": "loc:square", "depth": 3}, &nb)
	got := map[string]worldtools.Neighbor{}
	for _, n := range nb.Neighbors {
		got[n.ID] = n
	}
	if len(nb.Neighbors) != 4 || got["loc:bridge"].Distance != 3 || !slices.Equal(got["loc:bridge"].Path, []string{"north", "north", "north"}) ||
		got["loc:tavern"].Distance != 1 || got["loc:road"].Name != "King's Road" {
		t.Fatalf("neighbors = %+v", nb)
	}
	call(t, cs, "get-neighbors", map[string]any{"locationId": "loc:square"}, &nb)
	if nb.Depth != 1 || len(nb.Neighbors) != 2 {
		t.Fatalf("depth-1 neighbors = %+v", nb)
	}

	// Bad inputs and not-found: tool errors the model can read.
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"get-location", map[string]any{"locationId": "loc:nowhere"}, `no location with id "loc:nowhere"`},
		{"get-location", map[string]any{"locationId": "player:ada"}, `should start with "loc:"`},
		{"get-location", map[string]any{"locationId": ""}, "minLength"},
		{"get-location", map[string]any{"locationId": "loc:" + strings.Repeat("x", 200)}, "maxLength"},
		{"get-location", map[string]any{}, "locationId"},
		{"list-exits", map[string]any{"locationId": "loc:nowhere"}, `no location with id "loc:nowhere"`},
		{"get-player-state", map[string]any{"playerId": "player:nobody"}, `no player with id "player:nobody"`},
		{"get-neighbors", map[string]any{"locationId": "loc:square", "depth": 4}, "maximum"},
		{"get-neighbors", map[string]any{"locationId": "loc:square", "depth": 0.5}, "integer"},
		{"get-neighbors", map[string]any{"locationId": "loc:nowhere"}, `no location with id "loc:nowhere"`},
		{"list-recent-events", map[string]any{"entityId": "loc:square", "limit": 51}, "maximum"},
		{"list-recent-events", map[string]any{"entityId": ""}, "minLength"},
	} {
		text, isErr := call(t, cs, c.tool, c.args, nil)
		if !isErr || !strings.Contains(text, c.want) {
			t.Errorf("%s %v: isError=%v text=%q, want it to contain %q", c.tool, c.args, isErr, text, c.want)
		}
	}
}

func TestListRecentEvents(t *testing.T) {
	e := setup(t, mcpx.RateLimit{})
	cs, err := connect(t, e.url, token)
	if err != nil {
		t.Fatal(err)
	}
	// No stream yet: a tool error, not a crash.
	if text, isErr := call(t, cs, "list-recent-events", map[string]any{"entityId": "loc:square"}, nil); !isErr || !strings.Contains(text, "COMMITTED") {
		t.Fatalf("without stream: %v %q", isErr, text)
	}
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "COMMITTED", Subjects: []string{"world.committed.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 60; i++ {
		loc := "loc:gate"
		if i%2 == 0 {
			loc = "loc:square"
		}
		ev := map[string]any{
			"eventId": fmt.Sprintf("evt:%03d", i), "type": "Player.Moved", "proposalId": fmt.Sprintf("prop-%d", i),
			"correlationId": fmt.Sprintf("corr-%d", i), "occurredUtc": "2026-01-01T00:00:00Z", "committedUtc": "2026-01-01T00:00:01Z",
			"payload": map[string]any{"playerId": "player:ada", "to": map[string]any{"locationId": loc}},
		}
		b, _ := json.Marshal(ev)
		if _, err := e.js.Publish(ctx, "world.committed.player.moved", b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.js.Publish(ctx, "world.committed.junk", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	var out worldtools.RecentEventsOutput
	call(t, cs, "list-recent-events", map[string]any{"entityId": "loc:square", "limit": 3}, &out)
	if len(out.Events) != 3 || out.Events[0].EventID != "evt:060" || out.Events[1].EventID != "evt:058" || out.Events[2].EventID != "evt:056" {
		t.Fatalf("events = %+v", out.Events)
	}
	if ev := out.Events[0]; ev.Type != "Player.Moved" || ev.ProposalID != "prop-60" || ev.CorrelationID != "corr-60" || ev.CommittedUtc == "" || ev.Payload["playerId"] != "player:ada" {
		t.Fatalf("event = %+v", ev)
	}
	call(t, cs, "list-recent-events", map[string]any{"entityId": "player:ada", "limit": 50}, &out)
	if len(out.Events) != 50 || out.Events[0].EventID != "evt:060" {
		t.Fatalf("player events: %d, first %+v", len(out.Events), out.Events[0])
	}
	call(t, cs, "list-recent-events", map[string]any{"entityId": "loc:tavern"}, &out)
	if len(out.Events) != 0 || out.Scanned != 61 {
		t.Fatalf("tavern events = %+v", out)
	}
	// No consumer was created on the stream.
	st, _ := e.js.Stream(ctx, "COMMITTED")
	info, _ := st.Info(ctx)
	if info.State.Consumers != 0 {
		t.Fatalf("consumers = %d", info.State.Consumers)
	}
}

func TestAuthAndRateLimit(t *testing.T) {
	e := setup(t, mcpx.RateLimit{PerSecond: 0.01, Burst: 2})
	if _, err := connect(t, e.url, "bad-token"); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := connect(t, e.url, "lore-only-token-000000001"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("wrong scope: %v", err)
	}
	cs, err := connect(t, e.url, token)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, isErr := call(t, cs, "list-exits", map[string]any{"locationId": "loc:square"}, nil); isErr {
			t.Fatal("within burst refused")
		}
	}
	if text, isErr := call(t, cs, "list-exits", map[string]any{"locationId": "loc:square"}, nil); !isErr || !strings.Contains(text, "rate limit exceeded") || !strings.Contains(text, "retry after") {
		t.Fatalf("over limit: %v %q", isErr, text)
	}
}

// The read-only connection mcp-world uses cannot write: graphd refuses a
// write both because of ReadOnlyStrategy and because the user is read-only.
func TestGraphAccessCannotWrite(t *testing.T) {
	e := setup(t, mcpx.RateLimit{})
	g, err := e.srv.Graph().G()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-g.AddV("Location").Property(gremlingo.T.Id, "loc:evil").Iterate(); err == nil {
		t.Fatal("write through mcp-world's traversal source succeeded")
	}
	if err := <-g.V("loc:square").Property("name", "Defaced").Iterate(); err == nil {
		t.Fatal("property write succeeded")
	}
	// Even without the strategy, the reader credentials are refused.
	settings := e.srv.Graph().Settings()
	settings.ReadOnly = false
	conn, err := graphx.Open(settings)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	plain, err := conn.G()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-plain.AddV("Location").Property(gremlingo.T.Id, "loc:evil2").Iterate(); err == nil {
		t.Fatal("write with the read-only user succeeded")
	}
	cs, err := connect(t, e.url, token)
	if err != nil {
		t.Fatal(err)
	}
	var loc worldtools.Location
	call(t, cs, "get-location", map[string]any{"locationId": "loc:square"}, &loc)
	if loc.Name != "Market Square" {
		t.Fatalf("world changed: %+v", loc)
	}
	for _, id := range []string{"loc:evil", "loc:evil2"} {
		if _, isErr := call(t, cs, "get-location", map[string]any{"locationId": id}, nil); !isErr {
			t.Fatalf("%s was written", id)
		}
	}
}

// BenchmarkGetLocation: get-location over Streamable HTTP, 8 concurrent clients.
func BenchmarkGetLocation(b *testing.B) {
	e := setup(b, mcpx.RateLimit{})
	const clients = 8
	sessions := make([]*mcp.ClientSession, clients)
	for i := range sessions {
		cs, err := connect(b, e.url, token)
		if err != nil {
			b.Fatal(err)
		}
		sessions[i] = cs
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	next := make(chan struct{})
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, b.N/clients+1)
			for range next {
				t0 := time.Now()
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get-location", Arguments: map[string]any{"locationId": "loc:square"}})
				if err != nil || res.IsError {
					b.Error(err, res)
					return
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	for i := 0; i < b.N; i++ {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "calls/s")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	}
}
