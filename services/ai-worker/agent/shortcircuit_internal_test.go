package agent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
)

// The short-circuit's decision (issue 41): After reuses in a row, each within Window of the
// one before, start a Cooldown during which the latest accepted content answers; a reuse in
// the cooldown updates the content without extending it; once it is over the target is
// forgotten and After more reuses are needed; a run broken by another ending, or spread
// further apart than Window, starts nothing.
func TestShortCircuitDecision(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	r := func(id string) events.Reuse { return events.Reuse{ProposalID: id} }
	s := NewShortCircuit(ShortCircuitConfig{After: 2, Window: 10 * time.Minute, Cooldown: 5 * time.Minute})
	const k = "quest-writer\x00quest_seed\x00loc:quay"
	decide := func(at time.Duration) string {
		got, ok := s.Decide(k, t0.Add(at))
		if !ok {
			return ""
		}
		return got.ProposalID
	}
	s.Reused(k, r("a"), t0)
	if got := decide(time.Minute); got != "" {
		t.Fatalf("after one reuse: answered with %q, want the model asked", got)
	}
	s.Reused(k, r("b"), t0.Add(2*time.Minute)) // the second in a row: cooldown to 7m
	if got := decide(3 * time.Minute); got != "b" {
		t.Fatalf("after two reuses: %q, want the latest content b", got)
	}
	if got := decide(3 * time.Minute); got != "b" {
		t.Fatal("a decision must not use the cooldown up")
	}
	s.Reused(k, r("c"), t0.Add(6*time.Minute)) // in the cooldown: newer content, same end
	if got := decide(6*time.Minute + 59*time.Second); got != "c" {
		t.Fatalf("in the cooldown after a newer reuse: %q, want c", got)
	}
	if got := decide(7 * time.Minute); got != "" {
		t.Fatalf("at the cooldown's end: %q, want the model asked (the reuse in the cooldown extends nothing)", got)
	}
	s.Reused(k, r("d"), t0.Add(8*time.Minute))
	if got := decide(8 * time.Minute); got != "" {
		t.Fatalf("one reuse after a cooldown: %q, want the model asked (the count starts again)", got)
	}

	// Spread further apart than the window: no run.
	s2 := NewShortCircuit(ShortCircuitConfig{After: 2, Window: 10 * time.Minute, Cooldown: 5 * time.Minute})
	s2.Reused(k, r("a"), t0)
	s2.Reused(k, r("b"), t0.Add(11*time.Minute))
	if _, ok := s2.Decide(k, t0.Add(12*time.Minute)); ok {
		t.Fatal("two reuses 11 minutes apart (window 10) started a cooldown")
	}
	s2.Reused(k, r("c"), t0.Add(13*time.Minute))
	if _, ok := s2.Decide(k, t0.Add(14*time.Minute)); !ok {
		t.Fatal("the second reuse within the window started no cooldown")
	}

	// Broken by another ending: no run; other targets are their own.
	s3 := NewShortCircuit(ShortCircuitConfig{})
	s3.Reused(k, r("a"), t0)
	s3.Other(k, t0.Add(time.Second))
	s3.Reused(k, r("b"), t0.Add(2*time.Second))
	s3.Reused("quest-writer\x00quest_seed\x00loc:chapel", r("x"), t0.Add(2*time.Second))
	if _, ok := s3.Decide(k, t0.Add(3*time.Second)); ok {
		t.Fatal("a run broken by a reprompt started a cooldown")
	}

	// Off, and nil, decide nothing and record safely.
	if off := NewShortCircuit(ShortCircuitConfig{After: -1}); off != nil {
		t.Fatal("After -1 must turn the short-circuit off")
	}
	var none *ShortCircuit
	none.Reused(k, r("a"), t0)
	none.Other(k, t0)
	if _, ok := none.Decide(k, t0); ok {
		t.Fatal("a nil short-circuit decided")
	}
}

// The key of a trigger (its bound fields) and of a refused proposal (its payload) name the same
// target, the dedup gate's scope; a line answering the player's words has none.
func TestShortCircuitKeys(t *testing.T) {
	quest := roles.Role{Name: "quest-writer", Kind: events.KindQuestSeed, UsesLLM: true}
	line := roles.Role{Name: "npc-dialogue", Kind: events.KindNPCDialogue, UsesLLM: true}
	prop := func(kind, payload string) *events.Proposal {
		return &events.Proposal{Kind: kind, Payload: json.RawMessage(payload)}
	}
	qk := shortCircuitKey(quest, map[string]string{"locationId": "loc:quay", "questId": "quest:q1"})
	pk := payloadKey(quest, prop(events.KindQuestSeed, `{"questId":"quest:other","locationId":"loc:quay","title":"T","hook":"H","objectives":["O"]}`))
	if qk == "" || qk != pk {
		t.Fatalf("quest keys %q and %q, want the same location's", qk, pk)
	}
	lk := shortCircuitKey(line, map[string]string{"npcId": "npc:orla", "playerId": "player:ines", "locationId": "loc:quay"})
	lp := payloadKey(line, prop(events.KindNPCDialogue, `{"npcId":"npc:orla","playerId":"player:ines","locationId":"loc:quay","line":"Tide's out.","intent":"chat"}`))
	if lk == "" || lk != lp || lk == shortCircuitKey(line, map[string]string{"npcId": "npc:orla", "playerId": "player:wen"}) {
		t.Fatalf("line keys %q and %q, want the same NPC–player pair's, another player's apart", lk, lp)
	}
	if k := shortCircuitKey(line, map[string]string{"npcId": "npc:orla", "playerId": "player:ines", roles.BindPlayerSaid: "any news?"}); k != "" {
		t.Fatalf("a line answering the player's words has key %q, want none", k)
	}
	if k := shortCircuitKey(roles.Role{Name: "world-rules", Kind: events.KindPlayerMoved}, map[string]string{"playerId": "player:ines"}); k != "" {
		t.Fatalf("a role without a model has key %q, want none", k)
	}
}
