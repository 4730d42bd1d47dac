package processor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

func gauge(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

var lines int

func line(npc, player, text string, lore bool) *events.Proposal {
	lines++
	p := proposal(events.KindNPCDialogue, fmt.Sprintf("dlg-%d", lines),
		obj{"npcId": npc, "playerId": player, "locationId": "loc:quay", "line": text, "intent": "chat"})
	if lore {
		p.Provenance = &events.Provenance{ToolCalls: []events.ToolCall{{Server: "lore", Tool: "search-lore"}}}
	}
	return p
}

// The diversity rules on committed content: distinct-n per purpose over a sliding window, lines
// repeated to other players, lore grounding, the stale share of NPCs, and the memory bound.
func TestDiversityOfCommittedContent(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := processor.NewDiversity(reg, processor.DiversityConfig{Window: 4, NPCLines: 3, MaxNPCs: 2})
	// Orla says the same line to three players: stale (variety 1/3), repeated across players.
	for _, p := range []string{"player:ines", "player:rook", "player:wen"} {
		d.Observe(line("npc:orla", p, "Berth four is free.", false))
	}
	if got := gauge(t, reg, "worldgate_npc_stale_ratio"); got != 1 {
		t.Errorf("stale share %v, want 1 (one NPC heard 3 times, all the same)", got)
	}
	if got := gauge(t, reg, "worldgate_dialogue_cross_player_repeat_ratio"); got != 1 {
		t.Errorf("cross-player repeats %v, want 1", got)
	}
	if got := gauge(t, reg, "worldgate_content_distinct_ratio", "purpose", "npc_dialogue", "n", "1"); got != 4.0/12 {
		t.Errorf("distinct-1 %v, want 4/12", got)
	}
	// Fenn varies his lines, grounded in lore: not stale; the window (4) drops Orla's first line.
	for i, text := range []string{"Mackerel is cheap today.", "The boats came in heavy.", "A pilot rowed out at midnight."} {
		d.Observe(line("npc:fenn", "player:rook", text, i > 0))
	}
	if got := gauge(t, reg, "worldgate_npc_stale_ratio"); got != 0.5 {
		t.Errorf("stale share %v, want 0.5 (orla stale, fenn not)", got)
	}
	if got := gauge(t, reg, "worldgate_content_lore_grounded_ratio", "purpose", "npc_dialogue"); got != 0.5 {
		t.Errorf("lore grounded %v, want 0.5 (2 of the window's 4)", got)
	}
	if got := gauge(t, reg, "worldgate_dialogue_cross_player_repeat_ratio"); got != 0 {
		t.Errorf("cross-player repeats %v, want 0: the window holds orla's line to one player only", got)
	}
	// A third NPC: the cap (2) forgets the least recently heard, orla, and her stale lines.
	d.Observe(line("npc:tam", "player:ines", "Pull, don't yank.", false))
	if got := gauge(t, reg, "worldgate_npcs_heard"); got != 2 {
		t.Errorf("NPCs heard %v, want 2 (the cap)", got)
	}
	if got := gauge(t, reg, "worldgate_npc_stale_ratio"); got != 0 {
		t.Errorf("stale share %v, want 0 once orla is forgotten", got)
	}
	// Kinds without generated text are not measured; ambience has its own purpose.
	d.Observe(proposal(events.KindPlayerMoved, "m1", obj{"playerId": "player:ines", "fromLocationId": "loc:quay", "toLocationId": "loc:market", "direction": "north"}))
	d.Observe(proposal(events.KindAmbience, "a1", obj{"locationId": "loc:quay", "text": "Gulls wheel over the quay.", "mood": "calm"}))
	if got := gauge(t, reg, "worldgate_content_distinct_ratio", "purpose", "ambience", "n", "2"); got != 1 {
		t.Errorf("ambience distinct-2 %v, want 1", got)
	}
	if n := testutil.CollectAndCount(reg, "worldgate_content_distinct_ratio"); n != 4 {
		t.Errorf("%d distinct-n series, want 4 (2 purposes x n = 1, 2)", n)
	}
}

// The processor measures what it commits, once per proposal.
func TestProcessorMeasuresCommittedDialogue(t *testing.T) {
	e, _, reg := startProcessor(t)
	world := []*events.Proposal{
		proposal(events.KindLocationCreated, "w1", obj{"locationId": "loc:quay", "name": "Quay", "description": "Tarred planks."}),
		proposal(events.KindNPCCreated, "w2", obj{"npcId": "npc:orla", "name": "Orla", "locationId": "loc:quay"}),
	}
	var said []*events.Proposal
	for i := range 8 {
		pid := fmt.Sprintf("player:p%d", i)
		world = append(world, proposal(events.KindPlayerCreated, "w-"+pid, obj{"playerId": pid, "name": pid, "locationId": "loc:quay"}))
		said = append(said, line("npc:orla", pid, "Berth four is free until the evening tide.", false))
	}
	for _, p := range world {
		publish(t, e.JS, p, p.ProposalID)
	}
	natstest.WaitFor(t, 15*time.Second, "world committed", func() bool { return committed(t, e) == uint64(len(world)) })
	for _, p := range said {
		publish(t, e.JS, p, p.ProposalID)
		publish(t, e.JS, p, p.ProposalID+"-again") // a redelivered copy commits nothing new
	}
	natstest.WaitFor(t, 15*time.Second, "lines decided", func() bool { return settled(t, e) && committed(t, e) == uint64(len(world)+len(said)) })
	if got := gauge(t, reg, "worldgate_npc_stale_ratio"); got != 1 {
		t.Errorf("stale share %v, want 1: orla said one line eight times", got)
	}
	if got := gauge(t, reg, "worldgate_content_distinct_ratio", "purpose", "npc_dialogue", "n", "1"); got != 7.0/56 {
		t.Errorf("distinct-1 %v, want 7/56 (eight copies of a 7-word line, each counted once)", got)
	}
}
