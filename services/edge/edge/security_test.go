package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/edge/edge"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// problemOf reads a problem document with each error's code.
func problemOf(t *testing.T, resp *http.Response) (status int, errs []struct {
	Field, Code, Message string
	Line                 int
}) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("status %d, content type %q, want a problem: %s", resp.StatusCode, ct, b)
	}
	var p struct {
		Status int `json:"status"`
		Errors []struct {
			Field, Code, Message string
			Line                 int
		}
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p.Status, p.Errors
}

// A player key (the /play console's) publishes only as its player and about its player, and
// reads only its player's outcomes: the attack — a page holding the console's key posts an
// event as another player — is refused with a sentence, and nothing is published.
func TestPlayerKeyActsOnlyForItsPlayer(t *testing.T) {
	e := start(t, nil)
	mine, _ := envelopeJSON(t, "player:ada")
	if resp := e.do(t, "POST", "/v1/events", adaOnlyKey, "application/json", mine); resp.StatusCode != 202 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("publishing as its own player: %d %s", resp.StatusCode, b)
	}
	asBo, _ := envelopeJSON(t, "player:bo")
	for _, c := range []struct{ name, ct, body, want string }{
		{"as another player", "application/json", asBo, `key "ada-console" acts only for player:ada: it may not publish as player:bo`},
		{"in a batch", "application/x-ndjson", mine + "\n" + asBo + "\n", "may not publish as player:bo"},
	} {
		status, errs := problemOf(t, e.do(t, "POST", "/v1/events", adaOnlyKey, c.ct, c.body))
		if status != 403 || len(errs) != 1 || errs[0].Field != "/actor/id" || !strings.Contains(errs[0].Message, c.want) {
			t.Errorf("%s: %d %+v, want 403 saying %q", c.name, status, errs, c.want)
		}
	}
	if n := natstest.StreamMsgs(t, e.nats.JS, events.StreamWorld, ""); n != 1 {
		t.Fatalf("%d events in WORLD, want only the player's own", n)
	}

	// Reading: only its player's outcomes.
	s := e.stream(t, adaOnlyKey, "", "")
	bo := publishOutcome(t, e, "player:bo", "not yours")
	ada := publishOutcome(t, e, "player:ada", "yours")
	if status, errs := problemOf(t, e.do(t, "GET", "/v1/outcomes?actor=player:bo", adaOnlyKey, "", "")); status != 403 || errs[0].Field != "actor" {
		t.Errorf("SSE of another player: %d %+v", status, errs)
	}
	if status, _ := problemOf(t, e.do(t, "GET", "/v1/events/"+bo.EventID+"/outcome?actor=player:bo&wait=0", adaOnlyKey, "", "")); status != 403 {
		t.Errorf("long poll of another player: %d", status)
	}
	// Another player's event and outcome are unknown to a player key (404, as an event never
	// published): the outcome is not delivered, nor is whether bo played.
	if resp := e.do(t, "GET", "/v1/events/"+bo.EventID+"/outcome?wait=0.3", adaOnlyKey, "", ""); resp.StatusCode != 404 {
		t.Errorf("another player's outcome reached a player key: %d", resp.StatusCode)
	}
	if _, o := s.outcome(t); o.OutcomeID != ada.OutcomeID {
		t.Errorf("the player key's stream delivered %s's outcome %q", o.Actor.ID, o.Refusal.Reason)
	}

	// A player key cannot be widened in its keys file.
	for _, k := range []edge.Key{
		{Name: "c", Secret: adaOnlyKey, Scopes: []string{"publish", "read:all"}, Players: []string{"player:ada"}},
		{Name: "c", Secret: adaOnlyKey, Scopes: []string{"read:player:bo"}, Players: []string{"player:ada"}},
	} {
		if _, err := edge.NewKeyring([]edge.Key{k}); err == nil || !strings.Contains(err.Error(), "acts only for player:ada") {
			t.Errorf("scopes %v with players %v: %v", k.Scopes, k.Players, err)
		}
	}
}

// No answer of edge carries Access-Control-Allow-Origin: * — every answer of the API is
// authenticated. With no origin configured (worldgate dev) no answer carries CORS headers at
// all (rs/cors would allow every origin); a configured origin is echoed, another gets none.
func TestCORSNeverAllowsEveryOrigin(t *testing.T) {
	if _, err := edge.New(edge.Config{JetStream: natstest.Start(t).JS, Keys: mustRing(t), CORSOrigins: []string{"*"}}); err == nil ||
		!strings.Contains(err.Error(), "name each origin") {
		t.Fatalf("CORS origin * accepted: %v", err)
	}
	body, _ := envelopeJSON(t, "player:ada")
	o := func(e *env) string { return publishOutcome(t, e, "player:ada", "x").EventID }
	for _, c := range []struct {
		name    string
		origins []string
		origin  string
		want    string
	}{
		{"none configured", nil, "http://evil.example", ""},
		{"another origin", []string{"https://game.example"}, "http://evil.example", ""},
		{"the configured origin", []string{"https://game.example"}, "https://game.example", "https://game.example"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, func(cfg *edge.Config) { cfg.CORSOrigins = c.origins })
			id := o(e)
			for _, r := range []struct{ method, path, key, ct, body string }{
				{"OPTIONS", "/v1/events", "", "", ""},
				{"OPTIONS", "/v1/outcomes", "", "", ""},
				{"POST", "/v1/events", allKey, "application/json", body},
				{"GET", "/v1/events/" + id + "/outcome?wait=0", allKey, "", ""},
				{"GET", "/v1/outcomes", "", "", ""},
				{"GET", "/openapi.json", "", "", ""},
			} {
				hdr := []string{"Origin", c.origin}
				if r.method == "OPTIONS" {
					hdr = append(hdr, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type")
				}
				resp := e.do(t, r.method, r.path, r.key, r.ct, r.body, hdr...)
				resp.Body.Close()
				if got := resp.Header.Get("Access-Control-Allow-Origin"); got != c.want {
					t.Errorf("%s %s from %s: Access-Control-Allow-Origin %q, want %q", r.method, r.path, c.origin, got, c.want)
				}
				if resp.Header.Get("Access-Control-Allow-Credentials") != "" {
					t.Errorf("%s %s: Access-Control-Allow-Credentials sent", r.method, r.path)
				}
			}
		})
	}
}

func mustRing(t *testing.T) *edge.Keyring {
	t.Helper()
	r, err := edge.NewKeyring([]edge.Key{{Name: "k", Secret: allKey, Scopes: []string{"publish"}}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// An idempotency key reused with another envelope is a conflict (409 naming the event it was
// first used for), not a 202 "duplicate" under an event id that was never stored; the same
// envelope again stays an idempotent 202 with the first event id.
func TestIdempotencyKeyReusedWithAnotherBodyConflicts(t *testing.T) {
	e := start(t, nil)
	first, env := envelopeJSON(t, "player:ada")
	accepted := func(resp *http.Response) (string, bool) {
		t.Helper()
		defer resp.Body.Close()
		var out struct {
			EventID  string          `json:"eventId"`
			Accepted []edge.Accepted `json:"accepted"`
		}
		if resp.StatusCode != 202 || json.NewDecoder(resp.Body).Decode(&out) != nil {
			t.Fatalf("status %d, want 202", resp.StatusCode)
		}
		return out.EventID, out.Accepted[0].Duplicate
	}
	if id, dup := accepted(e.do(t, "POST", "/v1/events", allKey, "application/json", first, "Idempotency-Key", env.IdempotencyKey)); id != env.EventID || dup {
		t.Fatalf("first: %s duplicate=%v", id, dup)
	}
	// A retry, even re-indented, is the same envelope.
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, []byte(first), "", "  ")
	for _, retry := range []string{first, pretty.String()} {
		if id, dup := accepted(e.do(t, "POST", "/v1/events", allKey, "application/json", retry, "Idempotency-Key", env.IdempotencyKey)); id != env.EventID || !dup {
			t.Fatalf("retry: %s duplicate=%v, want %s duplicate", id, dup, env.EventID)
		}
	}
	// Another event under the same key.
	_, other := envelopeJSON(t, "player:ada")
	other.IdempotencyKey = env.IdempotencyKey
	b, _ := json.Marshal(other)
	want := fmt.Sprintf("the key %q was first used for event %s with another body; use a new idempotencyKey", env.IdempotencyKey, env.EventID)
	status, errs := problemOf(t, e.do(t, "POST", "/v1/events", allKey, "application/json", string(b), "Idempotency-Key", env.IdempotencyKey))
	if status != 409 || len(errs) != 1 || errs[0].Field != "/idempotencyKey" || !strings.Contains(errs[0].Message, want) {
		t.Fatalf("reused key: %d %+v, want 409 saying %q", status, errs, want)
	}
	// In a batch: the line is named.
	fresh, _ := envelopeJSON(t, "player:ada")
	status, errs = problemOf(t, e.do(t, "POST", "/v1/events", allKey, "application/x-ndjson", fresh+"\n"+string(b)+"\n"))
	if status != 409 || errs[0].Line != 2 || !strings.Contains(errs[0].Message, "1 of 2 envelopes were published before this one") {
		t.Fatalf("reused key in a batch: %d %+v", status, errs)
	}
	if n := natstest.StreamMsgs(t, e.nats.JS, events.StreamWorld, ""); n != 2 {
		t.Fatalf("%d events in WORLD, want 2 (the first and the batch's fresh one)", n)
	}
}

// wait=0 answers now: 200 with an outcome already decided, 204 when there is none yet — not 503.
func TestLongPollWaitZeroAnswersNow(t *testing.T) {
	e := start(t, nil)
	o := publishOutcome(t, e, "player:ada", "no exit west")
	resp := e.do(t, "GET", "/v1/events/"+o.EventID+"/outcome?wait=0", allKey, "", "")
	var out edge.OutcomeResponse
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil || out.Outcomes[0].OutcomeID != o.OutcomeID {
		t.Fatalf("wait=0 on a decided event: %d %+v", resp.StatusCode, out)
	}
	resp.Body.Close()
	_, pending := envelopeJSON(t, "player:ada")
	if _, err := events.Publish(context.Background(), e.nats.JS, pending); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	resp = e.do(t, "GET", "/v1/events/"+pending.EventID+"/outcome?wait=0", allKey, "", "")
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("wait=0 on an undecided event: %d, want 204 with Retry-After", resp.StatusCode)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("wait=0 took %v", took)
	}
	// One never published is unknown, not pending.
	_, never := envelopeJSON(t, "player:ada")
	if p := readProblem(t, e.do(t, "GET", "/v1/events/"+never.EventID+"/outcome?wait=0", allKey, "", "")); p.Status != 404 {
		t.Fatalf("wait=0 on an unknown event: %+v, want 404", p)
	}
}

// An outcome whose body does not match its subject — what a compromised ai-worker could publish:
// kind committed, an abusive NPC line, on world.outcomes.refused.<player> — never reaches the
// player over SSE or long poll, and is counted; a genuine outcome after it still arrives.
func TestForgedOutcomeIsDroppedAndCounted(t *testing.T) {
	e := start(t, nil)
	ada := e.stream(t, adaKey, "", "")
	all := e.stream(t, allKey, "", "")

	_, req := envelopeJSON(t, "player:ada")
	p := &events.Proposal{ProposalID: "p-forged", Kind: events.KindNPCDialogue, SchemaVersion: events.ProposalSchemaVersion,
		CorrelationID: req.CorrelationID, CausationID: req.EventID, AgentRole: "npc-dialogue", Actor: req.Actor,
		Payload: json.RawMessage(`{"npcId":"npc:oren","playerId":"player:ada","locationId":"loc:tavern","line":"ABUSIVE LINE","intent":"greet"}`)}
	evt := events.DomainEvent{EventID: events.DomainEventID(p.ProposalID, 0), Type: "NPCDialogueAccepted", ProposalID: p.ProposalID,
		CorrelationID: p.CorrelationID, OccurredUTC: time.Now().UTC(), CommittedUTC: time.Now().UTC(), Payload: p.Payload}
	forged := events.CommittedOutcome(p, evt)
	if err := forged.Validate(); err != nil {
		t.Fatalf("the forgery must be a well-formed committed outcome: %v", err)
	}
	b, _ := json.Marshal(forged)
	for _, data := range [][]byte{b, []byte(`{"kind":`)} { // the forgery, then something unreadable
		if _, err := e.nats.JS.PublishMsg(context.Background(), &nats.Msg{Subject: events.OutcomeSubject(events.OutcomeRefused, "player:ada"), Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	genuine := publishOutcome(t, e, "player:ada", "no exit west")

	for name, s := range map[string]*sseClient{"player stream": ada, "read:all stream": all} {
		if _, o := s.outcome(t); o.OutcomeID != genuine.OutcomeID {
			t.Fatalf("%s delivered %s %q before the genuine outcome", name, o.Kind, o.Text())
		}
	}
	// The event is stored, and the forgery is no outcome of it: still pending.
	if _, err := events.Publish(context.Background(), e.nats.JS, req); err != nil {
		t.Fatal(err)
	}
	if resp := e.do(t, "GET", "/v1/events/"+req.EventID+"/outcome?wait=0.5", adaKey, "", ""); resp.StatusCode != 204 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("long poll delivered the forgery: %d %s", resp.StatusCode, b)
	}
	if resp := e.do(t, "GET", "/v1/events/"+genuine.EventID+"/outcome?wait=5", adaKey, "", ""); resp.StatusCode != 200 {
		t.Fatalf("long poll of the genuine outcome: %d", resp.StatusCode)
	}
	// Two streams and the long polls each met the forgery (and the unreadable message).
	if n := counter(t, e.reg, "worldgate_edge_outcomes_dropped_total", "misrouted"); n < 3 {
		t.Errorf("misrouted outcomes counted %v, want at least 3", n)
	}
	if n := counter(t, e.reg, "worldgate_edge_outcomes_dropped_total", "undecodable"); n < 2 {
		t.Errorf("undecodable outcomes counted %v, want at least 2", n)
	}
}

// counter reads a counter by its one label's value.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// Bodies with a member named twice — readers disagree on which value counts — are refused with
// a problem naming it (events.CheckJSON through the strict decoder), and nothing is published;
// so is a keys file with a duplicated member.
func TestDuplicateMembersAreRefused(t *testing.T) {
	e := start(t, nil)
	good, _ := envelopeJSON(t, "player:ada")
	twiceUtterance := strings.Replace(good, `"utterance":`, `"utterance":"<script>abuse</script>","utterance":`, 1)
	twiceActor := strings.Replace(good, `"actor":`, `"actor":{"kind":"player","id":"player:bo"},"actor":`, 1)
	for _, c := range []struct{ name, key, ct, body, field string }{
		{"a payload member twice", allKey, "application/json", twiceUtterance, "/payload/utterance"},
		{"the actor twice", adaOnlyKey, "application/json", twiceActor, "/actor"},
		{"in a batch", allKey, "application/x-ndjson", good + "\n" + twiceUtterance + "\n", "/payload/utterance"},
	} {
		status, errs := problemOf(t, e.do(t, "POST", "/v1/events", c.key, c.ct, c.body))
		if status != 400 || len(errs) != 1 || errs[0].Code != string(events.ProblemDuplicateKey) || errs[0].Field != c.field ||
			!strings.Contains(errs[0].Message, "named more than once") {
			t.Errorf("%s: %d %+v, want 400 %s at %s", c.name, status, errs, events.ProblemDuplicateKey, c.field)
		}
	}
	if n := natstest.StreamMsgs(t, e.nats.JS, events.StreamWorld, ""); n != 0 {
		t.Fatalf("%d events published from bodies with duplicate members", n)
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	_ = os.WriteFile(path, []byte(`{"keys":[{"name":"k","secret":"0123456789abcdef0","scopes":["read:player:ada"],"scopes":["publish","read:all"]}]}`), 0o600)
	if _, err := edge.LoadKeys(path); err == nil || !strings.Contains(err.Error(), "named more than once") {
		t.Fatalf("keys file with a member twice: %v", err)
	}
}
