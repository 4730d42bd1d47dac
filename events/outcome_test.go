package events

import (
	"encoding/json"
	"errors"
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
		{"newer version", mutate(func(m map[string]any) { m["schemaVersion"] = "4" }), ProblemSpecVersion, "/schemaVersion"},
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

// A world event an agent role decides not to act on gets a skipped outcome (issue 40 item 3):
// a reason, when to ask again, no event and no refusal, believed only on its own subject.
func TestSkippedOutcome(t *testing.T) {
	env := &Envelope{EventID: "0190a8f0-0000-7000-8000-000000000001", CorrelationID: "c-1", Type: PlayerMoved,
		Actor: Actor{Kind: "player", ID: "player:ada"}}
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	o := SkippedOutcome(env, "ambience", "loc:tavern", CodeAmbienceFresh, "loc:tavern has fresh ambience", 90*time.Second, at)
	raw, err := o.Encode()
	if err != nil {
		t.Fatalf("a skipped outcome is invalid: %v", err)
	}
	back, err := DecodeOutcome(raw)
	if err != nil || back.Kind != OutcomeSkipped || back.Skip == nil || back.Skip.Code != CodeAmbienceFresh || back.Skip.RetryAfter != 90 ||
		!back.Skip.RetryAtUTC.Equal(at.Add(90*time.Second)) || back.Event != nil || back.Refusal != nil {
		t.Fatalf("skipped outcome read back as %+v (%v)", back, err)
	}
	if o.Subject() != "world.outcomes.skipped.player:ada" || CheckOutcomeSubject(o.Subject(), o) != nil {
		t.Fatalf("skipped outcome on %s: %v", o.Subject(), CheckOutcomeSubject(o.Subject(), o))
	}
	if again := SkippedOutcome(env, "ambience", "loc:tavern", CodeAmbienceFresh, "other words", time.Second, at.Add(time.Minute)); again.OutcomeID != o.OutcomeID {
		t.Error("a redelivered skip has another outcome id")
	}
	if other := SkippedOutcome(env, "npc-dialogue", "", CodeAmbienceFresh, "x", 0, at); other.OutcomeID == o.OutcomeID || other.Skip.RetryAtUTC != nil {
		t.Errorf("another role's skip: %+v", other)
	}
	var mis *MisroutedError
	if err := CheckOutcomeSubject(OutcomeSubject(OutcomeRefused, "player:ada"), o); !errors.As(err, &mis) {
		t.Errorf("a skip on the refusals' subject: %v", err)
	}
	p := sampleProposal()
	evt := DomainEvent{EventID: DomainEventID(p.ProposalID, 0), Type: "NPCDialogueAccepted", ProposalID: p.ProposalID,
		CorrelationID: "c-1", OccurredUTC: at, CommittedUTC: at, Payload: p.Payload}
	smuggled := *o
	smuggled.Event = &evt
	if err := CheckOutcomeSubject(smuggled.Subject(), &smuggled); !errors.As(err, &mis) {
		t.Errorf("a skip carrying an event: %v", err)
	}
	if _, err := smuggled.Encode(); err == nil {
		t.Error("the outcome schema accepts a skip carrying an event")
	}
	committed := CommittedOutcome(p, evt)
	committed.Skip = o.Skip
	if err := CheckOutcomeSubject(committed.Subject(), committed); !errors.As(err, &mis) {
		t.Errorf("a commit carrying a skip: %v", err)
	}
	noSkip := *o
	noSkip.Skip = nil
	if _, err := noSkip.Encode(); err == nil {
		t.Error("the outcome schema accepts a skipped outcome without its skip")
	}
}

// A request whose answer near-duplicates accepted content is answered with that content
// (issue 41 item 1): a reused outcome carries the accepted proposal, its domain event and its
// payload (Text shows it), no event, refusal or skip, believed only on its own subject; it
// needs schemaVersion 3.
func TestReusedOutcome(t *testing.T) {
	p := &Proposal{ProposalID: "0190a8f0-0000-7000-8000-0000000000a2", Kind: KindQuestSeed, CorrelationID: "c-2",
		CausationID: "0190a8f0-0000-7000-8000-000000000002", AgentRole: "quest-planner", Actor: Actor{Kind: "player", ID: "player:ada"},
		Payload: json.RawMessage(`{"locationId":"loc:square","title":"Other","hook":"h2","objectives":["o"]}`), Attempt: 0}
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	prior := "0190a8f0-0000-7000-8000-0000000000a1"
	o := ReusedOutcome(p, Reuse{ProposalID: prior, EventID: DomainEventID(prior, 0), AcceptedUTC: at.Add(-time.Minute),
		Payload: json.RawMessage(`{"questId":"quest:q1","locationId":"loc:square","title":"The Lost Bell","hook":"Find it.","objectives":["find the bell"]}`)}, at)
	raw, err := o.Encode()
	if err != nil {
		t.Fatalf("a reused outcome is invalid: %v", err)
	}
	back, err := DecodeOutcome(raw)
	if err != nil || back.Kind != OutcomeReused || back.Reuse == nil || back.Reuse.ProposalID != prior || back.Event != nil ||
		back.SchemaVersion != "3" || back.LocationID != "loc:square" || back.EventID != p.CausationID {
		t.Fatalf("reused outcome read back as %+v (%v)", back, err)
	}
	if back.Text() != "The Lost Bell: Find it." {
		t.Errorf("a reused outcome's text is %q", back.Text())
	}
	if o.Subject() != "world.outcomes.reused.player:ada" || CheckOutcomeSubject(o.Subject(), o) != nil {
		t.Fatalf("reused outcome on %s: %v", o.Subject(), CheckOutcomeSubject(o.Subject(), o))
	}
	if again := ReusedOutcome(p, *o.Reuse, at.Add(time.Second)); again.OutcomeID != o.OutcomeID {
		t.Error("a redelivered refusal gives another reused outcome id")
	}
	withEvent := *o
	withEvent.Event = &DomainEvent{EventID: "e", Type: "QuestSeeded", Payload: json.RawMessage(`{}`)}
	if CheckOutcomeSubject(withEvent.Subject(), &withEvent) == nil {
		t.Error("a reused outcome carrying a committed event is believed")
	}
	if _, err := withEvent.Encode(); err == nil {
		t.Error("the outcome schema accepts a reused outcome carrying an event")
	}
	committed := *o
	committed.Kind = OutcomeCommitted
	committed.Event = withEvent.Event
	if CheckOutcomeSubject(committed.Subject(), &committed) == nil {
		t.Error("a commit carrying a reuse is believed")
	}
	noReuse := *o
	noReuse.Reuse = nil
	if _, err := noReuse.Encode(); err == nil {
		t.Error("the outcome schema accepts a reused outcome without its reuse")
	}
	v2 := strings.Replace(string(raw), `"schemaVersion":"3"`, `"schemaVersion":"2"`, 1)
	if _, err := DecodeOutcome([]byte(v2)); !Has(err, ProblemInvalidField) || !strings.Contains(err.Error(), "schemaVersion 2 cannot be reused") {
		t.Errorf("a v2 reused outcome: %v", err)
	}
}

// Outcomes written before kind skipped (schemaVersion 1) are still read, so those in flight
// across an upgrade drain; a version 1 outcome cannot be skipped; an unknown version is
// refused with a sentence.
func TestOutcomeVersions(t *testing.T) {
	v1 := []byte(`{"schemaVersion":"1","outcomeId":"6f1c1f5e-4b0b-5a43-9d63-2a8c1f0e0a11","kind":"refused",` +
		`"eventId":"0190a8f0-0000-7000-8000-000000000001","correlationId":"c-1","agentRole":"world-rules",` +
		`"actor":{"kind":"player","id":"player:ada"},"locationId":"loc:square",` +
		`"refusal":{"gate":"world-rules","code":"MOVE_REFUSED","reason":"loc:square has no exit west","transient":false},` +
		`"decidedUtc":"2026-11-27T10:00:00Z"}`)
	o, err := DecodeOutcome(v1)
	if err != nil || o.SchemaVersion != "1" || o.Kind != OutcomeRefused || o.Refusal.Code != CodeMoveRefused {
		t.Fatalf("a v1 outcome no longer decodes: %+v %v", o, err)
	}
	if CheckOutcomeSubject(o.Subject(), o) != nil {
		t.Error("a v1 refusal is not believed on its own subject")
	}
	skipped := strings.Replace(string(v1), `"kind":"refused"`, `"kind":"skipped"`, 1)
	skipped = strings.Replace(skipped, `"refusal":{"gate":"world-rules","code":"MOVE_REFUSED","reason":"loc:square has no exit west","transient":false}`,
		`"skip":{"code":"AMBIENCE_FRESH","reason":"fresh"}`, 1)
	if _, err := DecodeOutcome([]byte(skipped)); !Has(err, ProblemInvalidField) || !strings.Contains(err.Error(), "schemaVersion 1 cannot be skipped") {
		t.Errorf("a v1 skipped outcome: %v", err)
	}
	if _, err := DecodeOutcome([]byte(strings.Replace(skipped, `"schemaVersion":"1"`, `"schemaVersion":"2"`, 1))); err != nil {
		t.Errorf("the same outcome as v2: %v", err)
	}
	future := strings.Replace(string(v1), `"schemaVersion":"1"`, `"schemaVersion":"9"`, 1)
	if _, err := DecodeOutcome([]byte(future)); !Has(err, ProblemSpecVersion) || !strings.Contains(err.Error(), "upgrade the events module") {
		t.Errorf("an unknown version: %v", err)
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
