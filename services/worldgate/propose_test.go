package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/worldgate/worldgate/shared/slowtest"
)

// An outside narrator, with the official Go SDK client and a token from the dev issuer
// (discovered from mcp-propose's protected-resource metadata), proposes through mcp-propose on
// the embedded stack; the real gates commit one proposal and refuse another, and the status
// tool reports both (committed: the domain event, the gates that passed it, no replay;
// refused: the gate and its reason). The read-only dev client cannot reach mcp-propose, nor
// the narrator's client the read-only servers.
func TestNarratorProposesThroughMCPPropose(t *testing.T) {
	slowtest.Skip(t, "end-to-end (worldgate dev: a narrator proposing through mcp-propose)")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stdout, stderr bytes.Buffer
	go func() {
		done <- runDev(ctx, []string{"-data-dir", dir, "-no-demo", "-nats-port", "0", "-graph-port", "0", "-admin-port", "0", "-mcp-port", "0", "-edge-port", "0"}, &stdout, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	}()
	var ep map[string]any
	deadline := time.Now().Add(90 * time.Second)
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "endpoints.json"))
		if err == nil && json.Unmarshal(raw, &ep) == nil && ep["mcp.propose.url"] != nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("dev ended: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mcp-propose endpoint in endpoints.json after 90s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	proposeURL := ep["mcp.propose.url"].(string)
	connect := func(id, secret, url string) (*mcp.ClientSession, error) {
		h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{Credentials: &oauthex.ClientCredentials{
			ClientID: id, ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: secret}}})
		if err != nil {
			t.Fatal(err)
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "outside-narrator", Version: "1"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, OAuthHandler: h, DisableStandaloneSSE: true}, nil)
	}
	// Scopes are separate: the read-only client gets no token for mcp-propose, the narrator
	// none for mcp-world.
	if cs, err := connect(ep["mcp.client.id"].(string), ep["mcp.client.secret"].(string), proposeURL); err == nil {
		cs.Close()
		t.Fatal("the read-only dev client connected to mcp-propose")
	}
	narratorID, narratorSecret := ep["mcp.narrator.client.id"].(string), ep["mcp.narrator.client.secret"].(string)
	if cs, err := connect(narratorID, narratorSecret, ep["mcp.world.url"].(string)); err == nil {
		cs.Close()
		t.Fatal("the narrator's client connected to mcp-world")
	}
	cs, err := connect(narratorID, narratorSecret, proposeURL)
	if err != nil {
		t.Fatalf("narrator connecting with discovery: %v", err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name != "proposal-status" && (tl.Annotations == nil || tl.Annotations.ReadOnlyHint || tl.Annotations.DestructiveHint == nil || *tl.Annotations.DestructiveHint) {
			t.Errorf("%s: annotations %+v, want not read-only and not destructive", tl.Name, tl.Annotations)
		}
	}

	call := func(tool string, args map[string]any, out any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if out != nil && !res.IsError {
			raw, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(raw, out); err != nil {
				t.Fatalf("%s: %v: %s", tool, err, raw)
			}
		}
		return res
	}
	type submitted struct {
		ID    string   `json:"id"`
		Route []string `json:"route"`
		Watch struct {
			Actor string `json:"actor"`
		} `json:"watch"`
	}
	type status struct {
		Status   string `json:"status"`
		Outcomes []struct {
			EventType, Text, Gate, Code, Reason string
			Gates                               []string
		} `json:"outcomes"`
	}
	await := func(id string) status {
		t.Helper()
		end := time.Now().Add(60 * time.Second)
		for {
			var st status
			if res := call("proposal-status", map[string]any{"id": id}, &st); res.IsError {
				t.Fatalf("proposal-status: %v", res.GetError())
			}
			if st.Status != "pending" {
				return st
			}
			if time.Now().After(end) {
				t.Fatalf("proposal %s still pending after 60s", id)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// Bad input: a tool error naming the field, nothing proposed.
	if res := call("propose-ambience", map[string]any{"locationId": "tavern", "text": "x", "mood": "calm"}, nil); !res.IsError {
		t.Error("an ambience with a malformed location id was accepted")
	}

	var ok submitted
	call("propose-ambience", map[string]any{"locationId": "loc:forge-row", "text": "Sparks drift over the anvils as the evening shift begins.", "mood": "busy"}, &ok)
	// The narrator is who the token says (its client), never what the arguments say.
	if ok.ID == "" || slices.Contains(ok.Route, "replay") || !slices.Contains(ok.Route, "safety") || ok.Watch.Actor != "narrator:"+narratorID {
		t.Fatalf("submitted: %+v", ok)
	}
	if res := call("propose-ambience", map[string]any{"locationId": "loc:forge-row", "text": "Quiet.", "mood": "calm", "client": "someone-else"}, nil); !res.IsError {
		t.Error("a proposal naming its own client in the arguments was accepted")
	}
	st := await(ok.ID)
	if st.Status != "committed" || len(st.Outcomes) != 1 || st.Outcomes[0].EventType != "AmbienceGenerated" || !strings.Contains(st.Outcomes[0].Text, "Sparks drift") {
		t.Fatalf("status of the clean ambience: %+v", st)
	}
	t.Logf("committed: %+v", st)
	var passed []string
	for _, g := range st.Outcomes[0].Gates {
		if gate, outcome, _ := strings.Cut(g, ":"); outcome == "passed" {
			passed = append(passed, gate)
		}
	}
	if !slices.Equal(passed, ok.Route) {
		t.Errorf("gates passed %v, want the narrator's route %v", passed, ok.Route)
	}

	// worldgate trace shows who wrote it, and no model call.
	opUser := ep["nats.operator"].(map[string]any)
	var trOut, trErr bytes.Buffer
	if err := runTrace(ctx, []string{ok.ID, "-nats-url", ep["nats.url"].(string), "-nats-user", opUser["user"].(string), "-nats-password", opUser["password"].(string)}, &trOut, &trErr); err != nil {
		t.Fatalf("trace: %v\n%s%s", err, trOut.String(), trErr.String())
	}
	if out := trOut.String(); !strings.Contains(out, "written by narrator "+narratorID+" (mcp-propose propose-ambience)") || strings.Contains(out, " · template ") {
		t.Errorf("trace of the narrator's proposal:\n%s", out)
	}

	var bad submitted
	call("propose-ambience", map[string]any{"locationId": "loc:forge-row", "text": `The smiths hum <script>alert(1)</script> as they work.`, "mood": "busy"}, &bad)
	st = await(bad.ID)
	if st.Status != "refused" || len(st.Outcomes) != 1 || st.Outcomes[0].Gate != "safety" || st.Outcomes[0].Reason == "" {
		t.Fatalf("status of the ambience with markup: %+v", st)
	}
	t.Logf("refused: %+v", st)

	if res := call("proposal-status", map[string]any{"id": "not-an-id"}, nil); !res.IsError {
		t.Error("proposal-status accepted a malformed id")
	}
	// A dialogue line and a quest seed, committed through the same gates; a line for an NPC
	// who is elsewhere is refused by the invariant gate.
	for _, c := range []struct {
		tool  string
		args  map[string]any
		event string
	}{
		{"propose-dialogue-line", map[string]any{"npcId": "npc:brannoch", "playerId": "player:ana", "locationId": "loc:forge-row", "line": "Mind the glass, it remembers heat.", "intent": "greet"}, "NPCDialogueAccepted"},
		{"propose-quest-seed", map[string]any{"locationId": "loc:forge-row", "title": "The Cracked Kiln", "hook": "A kiln in Forge Row cracked overnight and the guild blames the deep vents.", "objectives": []string{"Inspect the kiln", "Ask Master Brannoch about the vents"}}, "QuestSeeded"},
	} {
		var sub submitted
		if res := call(c.tool, c.args, &sub); res.IsError {
			t.Fatalf("%s: %v", c.tool, res.GetError())
		}
		if st := await(sub.ID); st.Status != "committed" || st.Outcomes[0].EventType != c.event {
			t.Errorf("%s: %+v", c.tool, st)
		}
	}
	var elsewhere submitted
	call("propose-dialogue-line", map[string]any{"npcId": "npc:brannoch", "playerId": "player:ana", "locationId": "loc:tavern", "line": "I am not even here."}, &elsewhere)
	if st := await(elsewhere.ID); st.Status != "refused" || st.Outcomes[0].Gate != "invariant" {
		t.Errorf("a line for an NPC elsewhere: %+v", st)
	}

	// An enqueued content request: the quest planner answers it, and the status tool finds
	// the agent's outcome by the event id.
	var ev submitted
	if res := call("enqueue-world-event", map[string]any{"type": "Quest.SeedRequested", "payload": map[string]any{"locationId": "loc:forge-row", "theme": "a missing shipment of glass"}}, &ev); res.IsError || ev.ID == "" {
		t.Fatalf("enqueue-world-event: %+v %+v", res.GetError(), ev)
	}
	st = await(ev.ID)
	if (st.Status != "committed" && st.Status != "fallback") || len(st.Outcomes) != 1 || st.Outcomes[0].EventType != "QuestSeeded" {
		t.Fatalf("status of the enqueued quest request: %+v", st)
	}
	t.Logf("enqueued: %+v", st)
	if res := call("enqueue-world-event", map[string]any{"type": "Quest.SeedRequested", "payload": map[string]any{"theme": "no location"}}, nil); !res.IsError {
		t.Error("a Quest.SeedRequested without locationId was enqueued")
	}
	// A world-building or destructive kind has no tool; a world event that moves a player is
	// refused by the tool (and by the NATS server: TestMCPProposePublishesOnlyAsTheNarrator).
	res := call("enqueue-world-event", map[string]any{"type": "Player.MoveRequested", "payload": map[string]any{"playerId": "player:ada", "direction": "north"}}, nil)
	if !res.IsError {
		t.Error("a narrator enqueued Player.MoveRequested")
	}
}
