package gates

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
)

// narrated returns a narrator's ambience proposal as mcp-propose builds it.
func narratedProposal(t *testing.T, kind string) *events.Proposal {
	t.Helper()
	payload := map[string]any{
		events.KindAmbience:    map[string]any{"locationId": "loc:tavern", "text": "Rain drums on the shutters.", "mood": "calm"},
		events.KindNPCDialogue: map[string]any{"npcId": "npc:brannoc", "playerId": "player:ada", "locationId": "loc:tavern", "line": "Evening.", "intent": "greet"},
	}[kind]
	raw, _ := json.Marshal(payload)
	r := route.Default()
	pending, err := r.ForEmitter(events.EmitterNarrator, kind)
	if err != nil {
		t.Fatal(err)
	}
	return &events.Proposal{ProposalID: "p-narr", Kind: kind, SchemaVersion: events.ProposalSchemaVersion, CorrelationID: "c", CausationID: "p-narr",
		AgentRole: events.EmitterNarrator, Actor: events.Actor{Kind: "agent", ID: "narrator:editor"}, Payload: raw,
		Provenance: &events.Provenance{Narrator: &events.Narration{Client: "editor", Server: "mcp-propose", Tool: "propose-ambience"}},
		Route:      events.Route{Pending: pending}, CreatedUTC: time.Now().UTC()}
}

// The narrator's route is its kind's with safety and without replay; the schema gate admits a
// narrator's proposal only on that route, only of the narrator's kinds, only with its
// provenance and without model fields; the replay gate refuses a narrator's proposal.
func TestNarratorProposals(t *testing.T) {
	r := route.Default()
	for _, kind := range events.EmitterKinds(events.EmitterNarrator) {
		n, _ := r.ForEmitter(events.EmitterNarrator, kind)
		k, _ := r.For(kind)
		if slices.Contains(n, Replay) || !slices.Contains(n, Safety) || n[0] != Schema || n[len(n)-1] != Audit {
			t.Errorf("narrator route of %s: %v (kind's: %v)", kind, n, k)
		}
		if !slices.Contains(k, Replay) {
			t.Errorf("the default %s route has no replay gate: the test's premise is gone", kind)
		}
	}
	if got := events.NarratorRoute([]string{"schema", "invariant", "audit"}); !slices.Equal(got, []string{"schema", "safety", "invariant", "audit"}) {
		t.Errorf("a route without safety gets it after schema: %v", got)
	}
	// Every next hop of a narrator's route is allowed by NextHops (the gates' permissions).
	n, _ := r.ForEmitter(events.EmitterNarrator, events.KindAmbience)
	for i := 0; i+1 < len(n); i++ {
		if !slices.Contains(r.NextHops(n[i]), events.GateSubject(n[i+1])) {
			t.Errorf("NextHops(%s) lacks %s", n[i], n[i+1])
		}
	}

	routes := r
	check := func(p *events.Proposal, emitter string) Decision {
		if d, ok := emitterRule(events.EmitSubject(emitter), p); !ok {
			return d
		}
		return routeRule(&routes, emitter, p)
	}
	want := func(name string, d Decision, code events.Code, reason string) {
		t.Helper()
		switch {
		case code == "" && d.Outcome != Passed:
			t.Errorf("%s: %v %s, want passed", name, d.Outcome, d.Reason)
		case code != "" && (d.Outcome != Rejected || d.Code != code || !strings.Contains(d.Reason, reason)):
			t.Errorf("%s: %v %s %q, want %s containing %q", name, d.Outcome, d.Code, d.Reason, code, reason)
		}
	}
	want("narrator ambience", check(narratedProposal(t, events.KindAmbience), events.EmitterNarrator), "", "")
	want("narrator dialogue", check(narratedProposal(t, events.KindNPCDialogue), events.EmitterNarrator), "", "")

	p := narratedProposal(t, events.KindAmbience)
	p.Route.Pending, _ = r.For(events.KindAmbience) // the kind's route, replay included
	want("narrator on the replay route", check(p, events.EmitterNarrator), events.CodeRouteInvalid, "without replay")

	p = narratedProposal(t, events.KindAmbience)
	p.Kind = events.KindLoreFactAdded
	want("narrator world building", check(p, events.EmitterNarrator), events.CodeRouteInvalid, "may not propose lore_fact_added")

	p = narratedProposal(t, events.KindAmbience)
	p.Provenance.Model, p.Provenance.CostUSD = "gpt-x", 0.01
	want("narrator with model fields", check(p, events.EmitterNarrator), events.CodeRouteInvalid, "model, costUsd")

	p = narratedProposal(t, events.KindAmbience)
	p.Provenance = nil
	want("narrator without provenance", check(p, events.EmitterNarrator), events.CodeRouteInvalid, "provenance.narrator")

	p = narratedProposal(t, events.KindAmbience)
	p.AgentRole = events.EmitterAmbience
	p.Route.Pending, _ = r.For(events.KindAmbience)
	want("an agent claiming a narrator", check(p, events.EmitterAmbience), events.CodeRouteInvalid, "Only the narrator")

	// The replay gate refuses a narrator's proposal routed to it.
	g := &replay{templates: TemplateMap{}}
	p = narratedProposal(t, events.KindAmbience)
	p.Route.Trail = []events.Hop{{Gate: Schema, Outcome: events.OutcomePassed, Emitter: events.EmitterNarrator}}
	d, err := g.Check(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	want("replay gate", d, events.CodeRouteInvalid, "routed to the replay gate")

	// Strictly decoded, a narrator's provenance validates against schemaVersion 3 only.
	p = narratedProposal(t, events.KindAmbience)
	raw, _ := json.Marshal(p)
	if strings.Contains(string(raw), `"provider"`) || strings.Contains(string(raw), `"tokens"`) {
		t.Errorf("a narrator's proposal serialises model fields: %s", raw)
	}
	if _, err := (events.Decoder{}).Proposal(raw); err != nil {
		t.Errorf("narrator's proposal: %v", err)
	}
	p.SchemaVersion = "2"
	raw, _ = json.Marshal(p)
	if _, err := (events.Decoder{}).Proposal(raw); err == nil {
		t.Error("a schemaVersion 2 proposal with provenance.narrator was accepted")
	}
}
