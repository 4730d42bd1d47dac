package events

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func sampleProposal() *Proposal {
	return &Proposal{
		ProposalID: "p-1", Kind: KindNPCDialogue, SchemaVersion: ProposalSchemaVersion, CorrelationID: "c-1", CausationID: "e-1",
		AgentRole: "npc-dialogue", Actor: Actor{Kind: "player", ID: "player:ada"},
		Payload:    json.RawMessage(`{"npcId":"npc:oren","playerId":"player:ada","locationId":"loc:tavern","line":"<b>Hello</b>","intent":"greet"}`),
		Provenance: &Provenance{Provider: "scripted", Model: "m", Tokens: Tokens{Prompt: 10, Completion: 5}, CostUSD: 0.001},
		Route:      Route{Trail: []Hop{{Gate: "schema", Outcome: OutcomePassed, At: time.Now().UTC()}}},
		Attempt:    1,
	}
}

func TestOutcomeRoundTrip(t *testing.T) {
	p := sampleProposal()
	evt := DomainEvent{EventID: DomainEventID(p.ProposalID, 0), Type: "NPCDialogueAccepted", ProposalID: p.ProposalID,
		CorrelationID: "c-1", OccurredUTC: time.Now().UTC(), CommittedUTC: time.Now().UTC(), Payload: p.Payload}
	o := CommittedOutcome(p, evt)
	if o.Kind != OutcomeCommitted || o.EventID != "e-1" || o.LocationID != "loc:tavern" || o.Journey.Attempt != 1 || o.Journey.Tokens.Prompt != 10 {
		t.Fatalf("committed outcome: %+v", o)
	}
	if o.Text() != "<b>Hello</b>" {
		t.Fatalf("Text() = %q", o.Text())
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("valid outcome refused: %v", err)
	}
	if o.Subject() != "world.outcomes.committed.player:ada" {
		t.Fatalf("subject %q", o.Subject())
	}
	if again := CommittedOutcome(p, evt); again.OutcomeID != o.OutcomeID {
		t.Fatal("outcome id is not deterministic")
	}

	p.Provenance.Fallback = "refused after 3 reprompts"
	fb := CommittedOutcome(p, evt)
	if fb.Kind != OutcomeFallback || fb.FallbackReason == "" || fb.OutcomeID == o.OutcomeID {
		t.Fatalf("fallback outcome: %+v", fb)
	}
	rej := &Rejection{Gate: "safety", Code: CodeSafetyFlagged, Reason: "threat"}
	r := RefusedOutcome(p, rej, rej.Code, rej.Reason, time.Now())
	if err := r.Validate(); err != nil || r.Refusal.Gate != "safety" {
		t.Fatalf("refused outcome: %+v %v", r, err)
	}
}

func TestDecodeOutcomeProblems(t *testing.T) {
	p := sampleProposal()
	good, _ := json.Marshal(RefusedOutcome(p, &Rejection{Gate: "invariant"}, CodeInvariantViolation, "no such npc", time.Now()))
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(good, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	cases := []struct {
		name string
		data []byte
		code ProblemCode
		path string
	}{
		{"unknown field", mutate(func(m map[string]any) { m["extra"] = 1 }), ProblemUnknownField, "/extra"},
		{"newer version", mutate(func(m map[string]any) { m["schemaVersion"] = "2" }), ProblemSpecVersion, "/schemaVersion"},
		{"refused without refusal", mutate(func(m map[string]any) { delete(m, "refusal") }), ProblemMissingField, "/refusal"},
		{"unknown kind", mutate(func(m map[string]any) { m["kind"] = "maybe" }), ProblemInvalidField, "/kind"},
		{"not json", []byte(`{"kind":`), ProblemMalformed, ""},
	}
	for _, c := range cases {
		_, err := DecodeOutcome(c.data)
		if !Has(err, c.code) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: got %v, want %s at %q", c.name, err, c.code, c.path)
		}
	}
}

func TestActorToken(t *testing.T) {
	if ActorToken("player:ada") != "player:ada" {
		t.Fatal("a contract id must be its own token")
	}
	for _, id := range []string{"a.b", "x y", "*", ">", "", strings.Repeat("z", 200)} {
		tok := ActorToken(id)
		if strings.ContainsAny(tok, ". *>") || tok == "" || tok == ActorToken(id+"!") {
			t.Errorf("ActorToken(%q) = %q", id, tok)
		}
	}
}

func TestOutcomeFiltersDoNotOverlap(t *testing.T) {
	cases := []struct {
		kinds  []OutcomeKind
		actors []string
		want   string
	}{
		{nil, nil, "world.outcomes.>"},
		{[]OutcomeKind{OutcomeRefused}, nil, "world.outcomes.refused.>"},
		{nil, []string{"player:ada", "player:ada"}, "world.outcomes.*.player:ada"},
		{[]OutcomeKind{OutcomeCommitted, OutcomeFallback}, []string{"player:b"}, "world.outcomes.committed.player:b,world.outcomes.fallback.player:b"},
	}
	for _, c := range cases {
		if got := strings.Join(outcomeFilters(c.kinds, c.actors), ","); got != c.want {
			t.Errorf("outcomeFilters(%v, %v) = %s, want %s", c.kinds, c.actors, got, c.want)
		}
	}
}
