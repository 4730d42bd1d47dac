package proposetools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/mcp-propose/proposetools"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

var secret = []byte("proposetools-test-secret-0123456789")

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// narrator connects to url with the official SDK client and a token for subject that names
// players.
func narrator(t *testing.T, url, subject string, players ...string) *mcp.ClientSession {
	t.Helper()
	tok, err := mcpx.IssueToken(secret, mcpx.Token{Subject: subject, Scopes: []string{mcpx.ScopePropose}, Players: players, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: subject, Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearer(tok)}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// A narrator is not a player (issue 38, item 4): it may enqueue a world event that speaks for
// a player only if its access token names that player; refused, nothing is published. An event
// it may enqueue records the narrator as its actor and mcp-propose as its source.
func TestNarratorEnqueuesOnlyForPlayersItsTokenNames(t *testing.T) {
	env := natstest.Start(t)
	srv, err := proposetools.New(proposetools.Options{Options: mcpx.Options{Auth: mcpx.AuthConfig{JWTSecret: secret}}, JetStream: env.JS})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	ctx := context.Background()
	spoke := map[string]any{"type": events.PlayerSpokeToNPC, "payload": map[string]any{
		"playerId": "player:ada", "npcId": "npc:brannoc", "locationId": "loc:tavern", "utterance": "You owe me gold, innkeeper."}}
	spokeSubject := events.Subject(events.PlayerSpokeToNPC)

	for _, c := range []struct {
		name    string
		players []string
		want    string
	}{
		{"a token naming no players", nil, `narrator "gm" may not enqueue world events for player "player:ada": its access token names no players`},
		{"a token naming another player", []string{"player:bob"}, `its access token names only player:bob`},
	} {
		res, err := narrator(t, ts.URL, "gm", c.players...).CallTool(ctx, &mcp.CallToolParams{Name: proposetools.ToolEnqueue, Arguments: spoke})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !res.IsError || !strings.Contains(text(res), c.want) || !strings.Contains(text(res), "nothing was enqueued") {
			t.Errorf("%s: %s, want a refusal containing %q", c.name, text(res), c.want)
		}
	}
	if n := natstest.StreamMsgs(t, env.JS, events.StreamWorld, spokeSubject); n != 0 {
		t.Fatalf("%d events published for player:ada by narrators whose tokens do not name her", n)
	}

	// The narrator's own event (no player named) needs no player in its token.
	res, err := narrator(t, ts.URL, "gm").CallTool(ctx, &mcp.CallToolParams{Name: proposetools.ToolEnqueue, Arguments: map[string]any{
		"type": events.QuestSeedRequested, "payload": map[string]any{"locationId": "loc:forge-row", "theme": "a missing shipment of glass"}}})
	if err != nil || res.IsError {
		t.Fatalf("a quest request naming no player: %v %s", err, text(res))
	}

	// A token naming player:ada may speak for her; the event says who did.
	res, err = narrator(t, ts.URL, "gm-ada", "player:ada").CallTool(ctx, &mcp.CallToolParams{Name: proposetools.ToolEnqueue, Arguments: spoke})
	if err != nil || res.IsError {
		t.Fatalf("a narrator whose token names player:ada: %v %s", err, text(res))
	}
	var sub proposetools.Submitted
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &sub); err != nil || sub.ID == "" {
		t.Fatalf("submitted: %s %v", raw, err)
	}
	stream, err := env.JS.Stream(ctx, events.StreamWorld)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, spokeSubject)
	if err != nil {
		t.Fatalf("the event was not published: %v", err)
	}
	e, err := events.DecodeEnvelope(msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if e.EventID != sub.ID || e.Actor != (events.Actor{Kind: "agent", ID: "narrator:gm-ada"}) || e.Source != proposetools.Name || events.PlayerOf(e) != "player:ada" {
		t.Errorf("published %+v (source %q, player %q), want event %s by actor narrator:gm-ada from %s", e.Actor, e.Source, events.PlayerOf(e), sub.ID, proposetools.Name)
	}
	if n := natstest.StreamMsgs(t, env.JS, events.StreamWorld, spokeSubject); n != 1 {
		t.Errorf("%d Player.SpokeToNPC events published, want 1", n)
	}
}
