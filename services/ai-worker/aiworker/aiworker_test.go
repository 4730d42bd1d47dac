package aiworker_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/provenance"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/ai-worker/agent"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/shared/llm/prompt"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
)

// schemaSubject is where the agent roles propose: their emitter subjects.
var schemaSubject = events.SubjectEmitAll

func byKind(ps []stored, kind string) []stored {
	var out []stored
	for _, s := range ps {
		if s.p.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

// checkProvenance asserts what the replay gate checks: the template is registered with that
// hash, every tool result hashes to its recorded hash, and the context hash recomputes.
func checkProvenance(t *testing.T, p *events.Proposal) {
	t.Helper()
	pv := p.Provenance
	if pv == nil || pv.Provider == "" || pv.Model == "" || len(pv.ContextHash) != 64 {
		t.Fatalf("%s: incomplete provenance %+v", p.Kind, pv)
	}
	tplSHA := ""
	if pv.PromptTemplate != nil {
		if _, err := templates.Registry().Lookup(prompt.Ref{ID: pv.PromptTemplate.ID, Version: pv.PromptTemplate.Version, SHA256: pv.PromptTemplate.SHA256}); err != nil {
			t.Fatalf("%s: template not found by its recorded ref: %v", p.Kind, err)
		}
		tplSHA = pv.PromptTemplate.SHA256
	}
	for i, c := range pv.ToolCalls {
		if c.Server == "" || c.Tool == "" || len(c.ArgsHash) != 64 || len(c.ResultHash) != 64 {
			t.Fatalf("%s: tool call %d incomplete: %+v", p.Kind, i, c)
		}
		if c.Error == "" {
			if h, err := provenance.ResultHash(c.Result); err != nil || h != c.ResultHash {
				t.Fatalf("%s: tool call %d result hash %s does not match its result (%s, %v)", p.Kind, i, c.ResultHash, h, err)
			}
		}
	}
	ch, err := provenance.ContextHash(p.Kind, tplSHA, provenance.ToolResults(pv.ToolCalls), pv.Model)
	if err != nil || ch != pv.ContextHash {
		t.Fatalf("%s: context hash %s does not recompute (%s, %v)", p.Kind, pv.ContextHash, ch, err)
	}
	want, _ := route.Default().For(p.Kind)
	if !slices.Equal(p.Route.Pending, want) {
		t.Fatalf("%s: route %v, want %v", p.Kind, p.Route.Pending, want)
	}
}

func TestEachRoleProposesWithCompleteProvenance(t *testing.T) {
	s := startStack(t, stackOpts{})
	moved := s.publish(events.PlayerMoved, events.PlayerMovedPayload{PlayerID: "player:ada", FromLocationID: "loc:gate", ToLocationID: "loc:square", Direction: "south"})
	spoke := s.publish(events.PlayerSpokeToNPC, events.PlayerSpokeToNPCPayload{PlayerID: "player:ada", NPCID: "npc:mira", LocationID: "loc:square", Utterance: "Good morning! What news of the fountain?"})
	quest := s.publish(events.QuestSeedRequested, events.QuestSeedRequestedPayload{LocationID: "loc:tavern", PlayerID: "player:ada", Theme: "a missing cask"})
	move := s.publish(events.PlayerMoveRequested, events.PlayerMoveRequestedPayload{PlayerID: "player:ada", FromLocationID: "loc:square", Direction: "north"})
	noExit := s.publish(events.PlayerMoveRequested, events.PlayerMoveRequestedPayload{PlayerID: "player:ada", FromLocationID: "loc:square", Direction: "west"})
	got := s.waitProposals(schemaSubject, 4)

	for _, c := range []struct {
		env  *events.Envelope
		role string
		kind string
	}{{moved, roles.Ambience, events.KindAmbience}, {spoke, roles.NPCDialogue, events.KindNPCDialogue},
		{quest, roles.QuestPlanner, events.KindQuestSeed}, {move, roles.WorldRules, events.KindPlayerMoved}} {
		ps := byKind(got, c.kind)
		if len(ps) != 1 {
			t.Fatalf("%d %s proposals, want 1", len(ps), c.kind)
		}
		st, p := ps[0], ps[0].p
		if p.AgentRole != c.role || p.CausationID != c.env.EventID || p.CorrelationID != c.env.CorrelationID || p.Attempt != 0 {
			t.Errorf("%s: role %s causation %s correlation %s attempt %d", c.kind, p.AgentRole, p.CausationID, p.CorrelationID, p.Attempt)
		}
		if want := agent.ProposalID(c.role, c.env.EventID, 0); p.ProposalID != want || st.msgID != want+":gate:schema" {
			t.Errorf("%s: proposal id %s msg id %s, want the deterministic %s", c.kind, p.ProposalID, st.msgID, want)
		}
		checkProvenance(t, p)
		pv := p.Provenance
		t.Logf("%s: %s (%d tool calls, %d+%d tokens, $%.6f)", c.kind, p.Payload, len(pv.ToolCalls), pv.Tokens.Prompt, pv.Tokens.Completion, pv.CostUSD)
		if c.kind == events.KindPlayerMoved {
			if pv.Provider != agent.RulesProvider || len(pv.ToolCalls) != 1 || pv.ToolCalls[0].Tool != "list-exits" || pv.Tokens.Prompt != 0 {
				t.Errorf("rules provenance %+v", pv)
			}
			var pm map[string]string
			_ = json.Unmarshal(p.Payload, &pm)
			if pm["toLocationId"] != "loc:gate" || pm["direction"] != "north" || pm["fromLocationId"] != "loc:square" {
				t.Errorf("player_moved payload %s", p.Payload)
			}
			continue
		}
		if pv.Provider != "scripted" || !strings.HasPrefix(pv.Model, "scripted-") || pv.Tokens.Prompt == 0 || pv.Tokens.Completion == 0 ||
			pv.CostUSD <= 0 || pv.LatencyMs <= 0 || pv.CacheHit || pv.Fallback != "" || pv.PromptTemplate == nil || len(pv.ToolCalls) == 0 {
			t.Errorf("%s: provenance %+v", c.kind, pv)
		}
		spec, _ := templates.Get(roles.MustLookup(c.role).Template)
		if pv.Temperature != spec.Temperature || pv.Seed != spec.Seed {
			t.Errorf("%s: temperature %v seed %v, want the template's", c.kind, pv.Temperature, pv.Seed)
		}
		for _, tc := range pv.ToolCalls {
			if !roles.MustLookup(c.role).Allows(tc.Tool) {
				t.Errorf("%s called %s outside its allow-list", c.role, tc.Tool)
			}
		}
	}
	if pm := byKind(got, events.KindQuestSeed)[0].p; !strings.Contains(string(pm.Payload), roles.QuestID(quest.EventID)) || pm.Provenance.Model != "scripted-large" {
		t.Errorf("quest seed: payload %s model %s (want the rich tier and the derived quest id)", pm.Payload, pm.Provenance.Model)
	}
	// The move west has no exit: nothing is proposed for it.
	natstest_WaitSettled(t, s, roles.MustLookup(roles.WorldRules).Durable())
	for _, st := range s.proposals("proposals.>") {
		if st.p.CausationID == noExit.EventID {
			t.Fatalf("a move through a missing exit was proposed: %s", st.p.Payload)
		}
	}
	if n := metricstest.Sum(s.t, s.reg, "worldgate_ai_tasks_total", map[string]string{"role": roles.WorldRules, "outcome": "refused"}); n != 1 {
		t.Errorf("refused moves = %v, want 1", n)
	}
	if n := metricstest.Sum(s.t, s.reg, "worldgate_ai_requests_total", map[string]string{"purpose": "ambience", "outcome": "ok"}); n < 1 {
		t.Errorf("ai_requests_total{purpose=ambience} = %v: the registry's metrics are not recorded", n)
	}
}

func natstest_WaitSettled(t *testing.T, s *stack, durable string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !s.settled(events.StreamWorld, durable)() {
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s did not settle", durable)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Moves from one location that arrive together share one list-exits call while the cache has
// no answer for it yet. Before, each of them called mcp-world while the first call was in
// flight (bench: 475 calls for 2,500 moves over two locations, in two bursts).
func TestMovesFromOneLocationShareOneExitsLookup(t *testing.T) {
	s := startStack(t, stackOpts{noApp: true, slowTools: 300 * time.Millisecond})
	deps := s.deps
	deps.Committed, deps.Roles = s.nats.JS, []string{roles.WorldRules}
	s.startWorker(deps)
	const moves = 12
	for i := range moves {
		player := fmt.Sprintf("player:p%d", i)
		s.publishAs(player, events.PlayerMoveRequested, events.PlayerMoveRequestedPayload{PlayerID: player, FromLocationID: "loc:square", Direction: "north"})
	}
	got := s.waitProposals(schemaSubject, moves)
	if n := s.toolCalls.Load(); n != 1 {
		t.Fatalf("%d list-exits calls for %d moves from one location, want 1", n, moves)
	}
	if hits, misses := metricstest.Sum(t, s.reg, "worldgate_ai_exits_cache_hits_total", nil), metricstest.Sum(t, s.reg, "worldgate_ai_exits_cache_misses_total", nil); hits != moves-1 || misses != 1 {
		t.Errorf("exits cache: %v hits, %v misses; want %d and 1 (a miss is a call to mcp-world)", hits, misses, moves-1)
	}
	for _, st := range got {
		if pv := st.p.Provenance; len(pv.ToolCalls) != 1 || pv.ToolCalls[0].Tool != "list-exits" || pv.ToolCalls[0].ResultHash == "" {
			t.Fatalf("move %s: provenance %+v, want the list-exits call it was decided on", st.p.ProposalID, pv)
		}
	}
}
