package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
)

// publishAttempts stores, for a published event of player's, what a request with one reprompt
// leaves: attempt 0 refused by the safety gate (its refusal carries the proposal), then
// attempt 1 committed, and its outcome. It returns the event.
func publishAttempts(t *testing.T, e *env, player string) *events.Envelope {
	t.Helper()
	ctx := context.Background()
	_, spoken := envelopeJSON(t, player)
	if _, err := events.Publish(ctx, e.nats.JS, spoken); err != nil {
		t.Fatal(err)
	}
	payload := json.RawMessage(`{"npcId":"npc:oren","playerId":"` + player + `","locationId":"loc:tavern","line":"Ale's warm, news is cold.","intent":"greet"}`)
	attempt := func(n int, tokens events.Tokens, cost float64, trail ...events.Hop) *events.Proposal {
		return &events.Proposal{ProposalID: "p-" + spoken.EventID[:8] + "-" + string(rune('0'+n)), Kind: events.KindNPCDialogue,
			CorrelationID: spoken.CorrelationID, CausationID: spoken.EventID, AgentRole: "npc-dialogue", Actor: spoken.Actor, Attempt: n, Payload: payload,
			Provenance: &events.Provenance{Provider: "scripted", Model: "scripted-small", Tokens: tokens, CostUSD: cost},
			Route:      events.Route{Trail: trail}}
	}
	now := time.Now()
	first := attempt(0, events.Tokens{Prompt: 100, Completion: 20}, 0.0002,
		events.Hop{Gate: "schema", Outcome: "passed", At: now}, events.Hop{Gate: "safety", Outcome: "rejected", Code: string(events.CodeSafetyFlagged), At: now})
	rej := events.Rejection{ProposalID: first.ProposalID, Kind: first.Kind, Gate: "safety", Code: events.CodeSafetyFlagged, Reason: "unsafe",
		CorrelationID: first.CorrelationID, AgentRole: first.AgentRole, Attempt: 0, RejectedUTC: now, Proposal: first}
	rb, _ := json.Marshal(rej)
	if _, err := e.nats.JS.Publish(ctx, events.RejectedSubject("safety"), rb); err != nil {
		t.Fatal(err)
	}
	second := attempt(1, events.Tokens{Prompt: 120, Completion: 30}, 0.0001, events.Hop{Gate: "schema", Outcome: "passed", At: now}, events.Hop{Gate: "safety", Outcome: "passed", At: now})
	o := events.CommittedOutcome(second, events.DomainEvent{EventID: "0190a8f0-0000-5000-8000-" + spoken.EventID[24:], Type: "NPCDialogueAccepted",
		ProposalID: second.ProposalID, Kind: second.Kind, CorrelationID: second.CorrelationID, OccurredUTC: now, CommittedUTC: now, Payload: payload})
	ob, _ := o.Encode()
	if _, err := e.nats.JS.Publish(ctx, o.Subject(), ob); err != nil {
		t.Fatal(err)
	}
	return spoken
}

// GET /v1/events/{id}/journey tells every attempt made for the event — the refused one with
// the gate that refused it, the one its outcome decided — and what the whole request spent,
// where the outcome's own journey has the final attempt's only (issue 40). An event of a
// player the key may not read is unknown to it.
func TestJourneyTellsEveryAttempt(t *testing.T) {
	e := start(t, nil)
	spoken := publishAttempts(t, e, "player:ada")
	get := func(key, id string) (int, string) {
		resp := e.do(t, "GET", "/v1/events/"+id+"/journey", key, "", "")
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get(adaKey, spoken.EventID)
	var j struct {
		Attempts []struct {
			ProposalID, Result string
			Attempt            int
			Gates              []struct{ Gate, Outcome, Code string }
			Refusals           []struct{ Gate, Code string }
			Tokens             events.Tokens
		}
		Tokens  events.Tokens
		CostUSD float64
	}
	if code != 200 || json.Unmarshal([]byte(body), &j) != nil {
		t.Fatalf("journey: %d %s", code, body)
	}
	if len(j.Attempts) != 2 || j.Attempts[0].Attempt != 0 || j.Attempts[0].Result != "refused" || j.Attempts[1].Result != "committed" {
		t.Fatalf("attempts %+v; want attempt 0 refused, then attempt 1 committed", j.Attempts)
	}
	if g := j.Attempts[0].Gates; len(g) != 2 || g[1].Gate != "safety" || g[1].Outcome != "rejected" || g[1].Code != string(events.CodeSafetyFlagged) ||
		len(j.Attempts[0].Refusals) != 1 || j.Attempts[0].Refusals[0].Gate != "safety" {
		t.Errorf("the refused attempt: %+v; want the safety gate's refusal among its gates", j.Attempts[0])
	}
	if j.Tokens != (events.Tokens{Prompt: 220, Completion: 50}) || j.CostUSD < 0.000299 || j.CostUSD > 0.000301 {
		t.Errorf("the request spent %+v and $%f; want both attempts' sums (220+50, $0.0003)", j.Tokens, j.CostUSD)
	}
	// Another player's event is unknown to ada's key; a malformed id is refused.
	bo := publishAttempts(t, e, "player:bo")
	if code, body := get(adaKey, bo.EventID); code != 404 || strings.Contains(body, "p-") {
		t.Errorf("ada's key asking for bo's journey: %d %s; want 404", code, body)
	}
	if code, _ := get(allKey, bo.EventID); code != 200 {
		t.Errorf("a read:all key asking for bo's journey: %d", code)
	}
	if code, _ := get(adaKey, "nope"); code != 400 {
		t.Errorf("a malformed id: %d, want 400", code)
	}
}
