package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/edge/console"
	"github.com/worldgate/worldgate/services/edge/edge"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

const consoleKey = "console-secret-000000000"

// startEdge serves edge with the console beside it (as worldgate dev does) when key is set,
// and without it (production edge) when it is empty.
func startEdge(t *testing.T, withConsole bool) *httptest.Server {
	t.Helper()
	n := natstest.Start(t)
	ring, err := edge.NewKeyring([]edge.Key{edge.PlayerKey("play-console", consoleKey, "player:ana")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := edge.Config{JetStream: n.JS, Keys: ring}
	if withConsole {
		cfg.Extra = console.Routes(console.Config{Key: consoleKey, Player: "player:ana",
			Start:    func(context.Context) (string, error) { return "loc:ash-gate", nil },
			Location: func(context.Context, string) (any, error) { return map[string]string{"name": "The Ash Gate"}, nil }})
	}
	s, err := edge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Shutdown(); srv.Close() })
	return srv
}

func get(t *testing.T, srv *httptest.Server, path, host string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// The console's key goes only to the console's own page: a page of another origin — a fetch
// from http://evil.example, a sibling site, or a name of the attacker's pointed at this address
// (DNS rebinding) — gets 403 and no key, and no answer allows another origin to read it. The
// page itself gets a key that acts only for its player. A production edge serves no key.
func TestConsoleKeyOnlyForItsOwnPage(t *testing.T) {
	srv := startEdge(t, true)
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range []struct {
		name, host string
		hdr        []string
	}{
		{"another origin", "", []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}},
		{"another origin, no fetch metadata", "", []string{"Origin", "http://evil.example"}},
		{"a sibling site", "", []string{"Sec-Fetch-Site", "same-site"}},
		{"DNS rebinding", "evil.example:" + strings.Split(host, ":")[1], []string{"Sec-Fetch-Site", "same-origin"}},
	} {
		resp, body := get(t, srv, "/play/config.json", c.host, c.hdr...)
		if resp.StatusCode != 403 || strings.Contains(body, consoleKey) || !strings.Contains(body, "only to the console's own page") {
			t.Errorf("%s: %d %q, want 403 without the key", c.name, resp.StatusCode, body)
		}
		if a := resp.Header.Get("Access-Control-Allow-Origin"); a != "" {
			t.Errorf("%s: Access-Control-Allow-Origin %q", c.name, a)
		}
	}

	resp, body := get(t, srv, "/play/config.json", "", "Origin", srv.URL, "Sec-Fetch-Site", "same-origin")
	var cfg struct{ Key, Player, Start string }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &cfg) != nil || cfg.Key != consoleKey || cfg.Player != "player:ana" {
		t.Fatalf("the console's own page: %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("config.json headers: %v", resp.Header)
	}
	if resp, _ := get(t, srv, "/play/config.json", "localhost:"+strings.Split(host, ":")[1]); resp.StatusCode != 200 {
		t.Fatalf("opened as localhost: %d", resp.StatusCode)
	}

	// The key it got plays its player only.
	post := func(player string) int {
		env, _ := events.NewEnvelope(events.PlayerMoveRequested, "play-console", events.Actor{Kind: "player", ID: player},
			events.PlayerMoveRequestedPayload{PlayerID: player, FromLocationID: "loc:ash-gate", Direction: "north"})
		b, _ := json.Marshal(env)
		req, _ := http.NewRequest("POST", srv.URL+"/v1/events", strings.NewReader(string(b)))
		req.Header.Set("Authorization", "Bearer "+cfg.Key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b := post("player:ana"), post("player:bo"); a != 202 || b != 403 {
		t.Fatalf("the console's key publishing as its player: %d, as another: %d (want 202, 403)", a, b)
	}
	if resp, _ := get(t, srv, "/v1/outcomes?actor=player:bo", "", "Authorization", "Bearer "+cfg.Key); resp.StatusCode != 403 {
		t.Fatalf("the console's key reading another player's outcomes: %d", resp.StatusCode)
	}

	// Production edge: no console, no key.
	prod := startEdge(t, false)
	resp, body = get(t, prod, "/play/config.json", "", "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != 404 || strings.Contains(body, consoleKey) {
		t.Fatalf("production edge's /play/config.json: %d %s", resp.StatusCode, body)
	}
	noKey := console.Routes(console.Config{})["GET /play/config.json"]
	rec := httptest.NewRecorder()
	noKey.ServeHTTP(rec, httptest.NewRequest("GET", "/play/config.json", nil))
	if rec.Code != 404 {
		t.Fatalf("a console without a key: %d", rec.Code)
	}
}

// The console shows every outcome kind for what it sent, a skipped one with its reason and when
// to ask again, instead of leaving the event "sent" for ever (issue 40 item 3). The page's own
// script runs under Node with a minimal DOM (Debian's nodejs; .ci/run installs it).
func TestConsoleShowsEveryOutcomeKind(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: `apt-get install -y nodejs` (.ci/run does it)")
	}
	env, err := events.NewEnvelope(events.PlayerMoved, "play-console", events.Actor{Kind: "player", ID: "player:ana"},
		events.PlayerMovedPayload{PlayerID: "player:ana", FromLocationID: "loc:ash-gate", ToLocationID: "loc:tavern", Direction: "east"})
	if err != nil {
		t.Fatal(err)
	}
	skipped := events.SkippedOutcome(env, "ambience", "loc:tavern", events.CodeAmbienceFresh,
		"loc:tavern has ambience committed 1m0s ago (fresh for 10m0s): none is generated until then", 9*time.Minute, time.Now())
	refused := events.RequestRefused(env, "world-rules", "loc:ash-gate", events.CodeMoveRefused, "loc:ash-gate has no exit west", time.Now())
	refused.EventID = "0190a8f0-0000-7000-8000-000000000002"
	// Fallback content after two refused reprompts: the fallback proposal is attempt 3.
	fallback := &events.Outcome{SchemaVersion: events.OutcomeSchemaVersion, OutcomeID: "0190a8f0-0000-7000-8000-0000000000f3", Kind: events.OutcomeFallback,
		EventID: "0190a8f0-0000-7000-8000-000000000003", CorrelationID: "c-3", AgentRole: "npc-dialogue", ProposalKind: events.KindNPCDialogue,
		Actor: events.Actor{Kind: "player", ID: "player:ana"}, LocationID: "loc:tavern", DecidedUTC: time.Now(),
		FallbackReason: "refused after 2 reprompts; last by the safety gate (SAFETY_FLAGGED): unsafe",
		Event: &events.DomainEvent{EventID: "0190a8f0-0000-7000-8000-0000000000e3", Type: "NPCDialogueAccepted", ProposalID: "p-3", CorrelationID: "c-3",
			OccurredUTC: time.Now(), CommittedUTC: time.Now(), Payload: json.RawMessage(`{"npcId":"npc:oren","line":"Not now, friend."}`)},
		Journey: &events.Journey{Attempt: 3, Gates: []events.Hop{{Gate: "schema", Outcome: "passed", At: time.Now()}, {Gate: "safety", Outcome: "passed", At: time.Now()}}}}
	in, _ := json.Marshal([]*events.Outcome{skipped, refused, fallback})
	cmd := exec.Command(node, "testdata/show.js", "static/app.js")
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("node: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var page struct {
		Feed []struct {
			Text string `json:"text"`
			Cls  string `json:"cls"`
		} `json:"feed"`
		Journeys []string `json:"journeys"`
	}
	if err := json.Unmarshal(out, &page); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// Oldest first, as the list numbers them (issue 40: the feed was numbered newest first).
	if len(page.Feed) != 3 || page.Feed[0].Cls != "skipped" || !strings.Contains(page.Feed[0].Text, "skipped: loc:tavern has ambience committed") ||
		!strings.Contains(page.Feed[0].Text, "ask again after") || page.Feed[1].Cls != "refused" || page.Feed[2].Cls != "fallback" {
		t.Fatalf("feed %+v; want the skip with its reason, the refusal, then the fallback line", page.Feed)
	}
	// A fallback after two reprompts says two (not its attempt, 3), and its gate chips are
	// the fallback content's (issue 40: "reprompts: 3" beside "refused after 2 reprompts", and
	// chips that read as if the model's answer had passed).
	var fb string
	for _, j := range page.Journeys {
		if strings.Contains(j, "fallback —") {
			fb = j
		}
	}
	if !strings.Contains(fb, "reprompts: 2") || strings.Contains(fb, "reprompts: 3") || !strings.Contains(fb, "fallback content: | schema passed") {
		t.Errorf("the fallback's journey reads %q; want reprompts: 2 and its chips as the fallback content's", fb)
	}
	var journey string
	for _, j := range page.Journeys {
		if strings.Contains(j, "ambience") {
			journey = j
		}
	}
	if !strings.Contains(journey, "skipped — ambience") || !strings.Contains(journey, "AMBIENCE_FRESH") {
		t.Fatalf("journeys %q; want the skipped event's journey to say so", page.Journeys)
	}
}
