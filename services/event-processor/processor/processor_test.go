package processor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

type obj = map[string]any

// Every kind applies, and each commit-time rule refuses with a COMMIT_CONFLICT that says why.
func TestEveryKindAppliesAndConflictsAreRejected(t *testing.T) {
	e, gd, reg := startProcessor(t)
	ro := reader(t, gd.URL())

	good := []*events.Proposal{
		proposal(events.KindLocationCreated, "p01", obj{"locationId": "loc:gate", "name": "Gate", "description": "A gate.", "region": "ashfall", "tags": []string{"city", "wall"}}),
		proposal(events.KindLocationCreated, "p02", obj{"locationId": "loc:well", "name": "Well", "description": "A well."}),
		proposal(events.KindExitAdded, "p03", obj{"fromLocationId": "loc:gate", "toLocationId": "loc:well", "direction": "north"}),
		proposal(events.KindExitAdded, "p04", obj{"fromLocationId": "loc:well", "toLocationId": "loc:gate", "direction": "south", "description": "back to the gate"}),
		// A second exit between the same two locations, in another direction.
		proposal(events.KindExitAdded, "p04w", obj{"fromLocationId": "loc:gate", "toLocationId": "loc:well", "direction": "west"}),
		proposal(events.KindFactionCreated, "p05", obj{"factionId": "faction:ash", "name": "Ash Wardens"}),
		proposal(events.KindNPCCreated, "p06", obj{"npcId": "npc:mara", "name": "Mara", "persona": "gruff", "locationId": "loc:gate", "factionId": "faction:ash", "rank": "captain"}),
		proposal(events.KindPlayerCreated, "p07", obj{"playerId": "player:ana", "name": "Ana", "locationId": "loc:gate"}),
		proposal(events.KindItemCreated, "p08", obj{"itemId": "item:key", "name": "Key", "holderId": "npc:mara"}),
		proposal(events.KindLoreFactAdded, "p09", obj{"loreId": "lore:wall", "title": "The wall", "text": "Built in ash.", "canonical": true, "tags": []string{"history"}, "about": []string{"loc:gate", "faction:ash"}}),
		proposal(events.KindAmbience, "p10", obj{"locationId": "loc:gate", "text": "Ash falls.", "mood": "grim"}),
		proposal(events.KindNPCDialogue, "p11", obj{"npcId": "npc:mara", "playerId": "player:ana", "locationId": "loc:gate", "line": "Halt.", "intent": "greet"}),
		proposal(events.KindQuestSeed, "p12", obj{"questId": "quest:ember", "locationId": "loc:well", "title": "Ember", "hook": "A glow below.", "objectives": []string{"descend", "return"}, "involves": []string{"npc:mara"}}),
		proposal(events.KindPlayerMoved, "p13", obj{"playerId": "player:ana", "fromLocationId": "loc:gate", "toLocationId": "loc:well", "direction": "north"}),
		proposal(events.KindExitRemoved, "p14", obj{"fromLocationId": "loc:well", "direction": "south", "reason": "collapsed"}),
		proposal(events.KindNPCRemoved, "p15", obj{"npcId": "npc:mara", "reason": "retired"}),
	}
	bad := []struct {
		p      *events.Proposal
		reason string
	}{
		{proposal(events.KindPlayerMoved, "b1", obj{"playerId": "player:ana", "fromLocationId": "loc:gate", "toLocationId": "loc:well", "direction": "north"}), "is not at loc:gate"},
		{proposal(events.KindExitAdded, "b2", obj{"fromLocationId": "loc:gate", "toLocationId": "loc:nowhere", "direction": "east"}), "loc:nowhere does not exist"},
		{proposal(events.KindExitAdded, "b3", obj{"fromLocationId": "loc:gate", "toLocationId": "loc:gate", "direction": "north"}), "already has an exit north"},
		{proposal(events.KindLocationCreated, "b4", obj{"locationId": "loc:gate", "name": "Again", "description": "x"}), "already exists"},
		{proposal(events.KindPlayerMoved, "b5", obj{"playerId": "player:ana", "fromLocationId": "loc:well", "toLocationId": "loc:gate", "direction": "south"}), "no exit south"},
		{proposal(events.KindNPCRemoved, "b6", obj{"npcId": "npc:mara", "reason": "twice"}), "does not exist"},
	}
	// The ambience is a fallback (canned content after refusals): its outcome is a fallback one.
	good[9].Provenance = &events.Provenance{Provider: "scripted", Model: "m", Fallback: "the model's answers were refused"}
	for _, p := range good {
		publish(t, e.JS, p, p.ProposalID)
	}
	for _, b := range bad {
		publish(t, e.JS, b.p, b.p.ProposalID)
	}
	natstest.WaitFor(t, 15*time.Second, "all decided", func() bool {
		return committed(t, e) == uint64(len(good)) && rejected(t, e) == uint64(len(bad)) && settled(t, e)
	})

	// Every outcome published reads as a reader reads it (schema included): the processor
	// encodes committed outcomes without a schema pass of its own.
	outcomes := readAll(t, e, events.SubjectOutcomesAll)
	if len(outcomes) != len(good) {
		t.Fatalf("%d outcomes, want one per committed proposal (%d)", len(outcomes), len(good))
	}
	kinds := map[events.OutcomeKind]int{}
	for _, raw := range outcomes {
		o, err := (events.Decoder{}).Outcome(raw)
		if err != nil {
			t.Fatalf("an outcome the processor published does not read: %v\n%s", err, raw)
		}
		kinds[o.Kind]++
	}
	if kinds[events.OutcomeFallback] != 1 || kinds[events.OutcomeCommitted] != len(good)-1 {
		t.Fatalf("outcome kinds %v, want one fallback and the rest committed", kinds)
	}

	v, ed := counts(t, ro)
	wantV := map[string]int64{"Location": 2, "Faction": 1, "Player": 1, "Item": 1, "LoreFact": 1, "Ambience": 1, "Dialogue": 1,
		"QuestSeed": 1, "AppliedEvent": int64(len(good)), "CommitConflict": int64(len(bad))}
	// Mara was removed with her edges (at, member_of, holds, spoken_by, involves).
	wantE := map[string]int64{"exit": 2, "at": 1, "about": 2, "describes": 1, "spoken_to": 1, "set_in": 1}
	if !equalCounts(v, wantV) || !equalCounts(ed, wantE) {
		t.Fatalf("vertices %v edges %v\nwant %v %v", v, ed, wantV, wantE)
	}
	if got := values(t, ro, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V("player:ana").Out("at").Id()
	}); len(got) != 1 || got[0] != "loc:well" {
		t.Fatalf("ana is at %v", got)
	}
	if got := values(t, ro, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V("loc:gate").OutE("exit").Values("direction").Order()
	}); len(got) != 2 || got[0] != "north" || got[1] != "west" {
		t.Fatalf("exits of the gate: %v, want north and west (both to the well)", got)
	}
	if got := values(t, ro, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V("player:ana").Values("version")
	}); len(got) != 1 || got[0] != int64(1) {
		t.Fatalf("ana's version is %#v, want int64 1", got)
	}
	if got := values(t, ro, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V("loc:gate").Values("tags").Order()
	}); len(got) != 2 || got[0] != "city" || got[1] != "wall" {
		t.Fatalf("gate tags %v", got)
	}

	// The committed events are well formed, on the right subjects, with the deterministic id.
	s, err := e.JS.Stream(context.Background(), events.StreamCommitted)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), events.CommittedSubject("PlayerMoved"))
	if err != nil {
		t.Fatal(err)
	}
	var evt events.DomainEvent
	if err := json.Unmarshal(m.Data, &evt); err != nil {
		t.Fatal(err)
	}
	if evt.EventID != events.DomainEventID("p13", 0) || m.Header.Get(events.HeaderMsgID) != evt.EventID || evt.ProposalID != "p13" ||
		evt.CorrelationID != "corr-p13" || evt.CommittedUTC.IsZero() || !strings.Contains(string(evt.Payload), "loc:well") {
		t.Fatalf("committed event %+v headers %v", evt, m.Header)
	}
	// Rejections are structured and say why.
	rs := readAll(t, e, events.RejectedSubject("processor"))
	byID := map[string]events.Rejection{}
	for _, raw := range rs {
		var r events.Rejection
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		byID[r.ProposalID] = r
	}
	for _, b := range bad {
		r := byID[b.p.ProposalID]
		if r.Gate != "processor" || r.Code != events.CodeCommitConflict || !strings.Contains(r.Reason, b.reason) || r.Transient {
			t.Errorf("rejection of %s: %+v (want reason containing %q)", b.p.ProposalID, r, b.reason)
		}
	}
	if got := metricstest.Sum(t, reg, "worldgate_proposals_committed_total", nil); got != float64(len(good)) {
		t.Fatalf("proposals_committed_total = %v", got)
	}
	if got := metricstest.Sum(t, reg, "worldgate_commit_rejections_total", nil); got != float64(len(bad)) {
		t.Fatalf("commit_rejections_total = %v", got)
	}
}

// The processor commits only what every gate of the kind's configured route passed and signed,
// in order, over exactly this content; anything else is refused naming the hop, and a proposal
// of the previous schema version is refused saying so.
func TestUnattestedProposalsAreRefusedNamingTheHop(t *testing.T) {
	e, _, _ := startProcessor(t)
	loc := proposal(events.KindLocationCreated, "a-loc", obj{"locationId": "loc:gate", "name": "Gate", "description": "A gate."})
	publish(t, e.JS, loc, "a-loc")
	natstest.WaitFor(t, 10*time.Second, "location committed", func() bool { return committed(t, e) == 1 })

	unsigned := proposal(events.KindAmbience, "a-unsigned", obj{"locationId": "loc:gate", "text": "Ash.", "mood": "grim"})
	unsigned.Route.Trail = []events.Hop{{Gate: "schema", Outcome: events.OutcomePassed, At: time.Now(), Emitter: "ambience"}}

	skipped := attested(proposal(events.KindNPCRemoved, "a-skipped", obj{"npcId": "npc:none", "reason": "gone"}))
	var trail []events.Hop
	for _, h := range skipped.Route.Trail {
		if h.Gate != "approval" {
			trail = append(trail, h)
		}
	}
	skipped.Route.Trail = trail

	tampered := attested(proposal(events.KindAmbience, "a-tampered", obj{"locationId": "loc:gate", "text": "Ash.", "mood": "grim"}))
	tampered.Payload = json.RawMessage(`{"locationId":"loc:gate","text":"<script>alert(1)</script>","mood":"grim"}`)

	old := attested(proposal(events.KindAmbience, "a-old", obj{"locationId": "loc:gate", "text": "Ash.", "mood": "grim"}))
	old.SchemaVersion = "1"

	for _, p := range []*events.Proposal{unsigned, skipped, tampered, old} {
		publish(t, e.JS, p, p.ProposalID)
	}
	natstest.WaitFor(t, 10*time.Second, "four refusals", func() bool { return rejected(t, e) == 4 })
	if n := committed(t, e); n != 1 {
		t.Fatalf("%d events committed, want only the honest location", n)
	}
	byID := map[string]events.Rejection{}
	for _, raw := range readAll(t, e, events.RejectedSubject("processor")) {
		var r events.Rejection
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		byID[r.ProposalID] = r
	}
	for id, want := range map[string]struct {
		code       events.Code
		hop, words string
	}{
		"a-unsigned": {events.CodeAttestationInvalid, "schema", "not signed"},
		"a-skipped":  {events.CodeAttestationInvalid, "approval", "approval gate's decision is missing"},
		"a-tampered": {events.CodeAttestationInvalid, "schema", "signature does not match"},
		"a-old":      {events.CodeSchemaInvalid, "", "predates attested gate decisions"},
	} {
		r := byID[id]
		hop, _ := r.Details["hop"].(string)
		if r.Code != want.code || hop != want.hop || !strings.Contains(r.Reason, want.words) {
			t.Errorf("%s: %s hop=%q %q; want %s hop=%q containing %q", id, r.Code, hop, r.Reason, want.code, want.hop, want.words)
		}
	}
}
