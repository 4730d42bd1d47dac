package gates_test

import (
	"context"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/fallback"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// Dedup's scope for dialogue is the NPC–player pair: one NPC telling two players the same news
// passes, telling one player the same thing twice does not. Fallback content (the answer of
// last resort) is never refused for repetition: on the dev stack, four hostile lines from one
// player to one NPC got the same policy line four times and three were refused, so the player
// got no answer at all.
func TestDedupScopeAndFallback(t *testing.T) {
	s := newStack(t)
	s.run(t, s.deps(testConfig()), "dedup")
	line := func(player, text string) *events.Proposal {
		return startAt(proposal(t, events.KindNPCDialogue, map[string]any{"npcId": "npc:mira", "playerId": player, "locationId": "loc:square", "line": text, "intent": "inform"}), "dedup")
	}
	news := "The fountain in the square ran red this morning, and nobody knows why."
	toAda := line("player:ada", news)
	s.publish(t, toAda)
	natstest.WaitFor(t, 10*time.Second, "first accepted", func() bool { return s.count(t, events.StreamProposals, "proposals.gate.replay") == 1 })
	toBob := line("player:bob", news)
	again := line("player:ada", news+"!")
	s.publish(t, toBob)
	s.publish(t, again)
	if r := s.waitRejected(t, again.ProposalID); r.Code != events.CodeDuplicate || r.Details["duplicateOf"] != toAda.ProposalID {
		t.Fatalf("the same line to the same player: %+v", r)
	}
	// Fallback content, four times to one player: every one passes.
	fb, err := fallback.Default().Payload(events.KindNPCDialogue, map[string]string{"npcId": "npc:mira", "playerId": "player:cy", "locationId": "loc:square"})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		p := startAt(proposal(t, events.KindNPCDialogue, nil), "dedup")
		p.Payload = fb
		p.Provenance.Fallback = "the input rail blocked the player's words (harassment)"
		s.publish(t, p)
	}
	// The same text proposed as the model's own (no fallback in provenance) is compared as usual.
	copied, err := fallback.Default().Payload(events.KindNPCDialogue, map[string]string{"npcId": "npc:mira", "playerId": "player:dee", "locationId": "loc:square"})
	if err != nil {
		t.Fatal(err)
	}
	var model []*events.Proposal
	for range 2 {
		p := startAt(proposal(t, events.KindNPCDialogue, nil), "dedup")
		p.Payload = copied
		model = append(model, p)
	}
	s.publish(t, model[0])
	natstest.WaitFor(t, 10*time.Second, "the model's copy accepted once", func() bool { return s.count(t, events.StreamProposals, "proposals.gate.replay") == 7 })
	s.publish(t, model[1])
	if r := s.waitRejected(t, model[1].ProposalID); r.Code != events.CodeDuplicate {
		t.Fatalf("the model repeating itself: %+v", r)
	}
	c, _ := s.nats.JS.Consumer(context.Background(), events.StreamProposals, "gate-dedup")
	natstest.WaitFor(t, 10*time.Second, "all acknowledged", func() bool {
		info, err := c.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	if n := s.count(t, events.StreamProposals, "proposals.gate.replay"); n != 7 {
		t.Fatalf("%d passed, want 7 (ada's first line, bob's, four fallbacks, the model's first copy)", n)
	}
	if n := s.count(t, events.StreamProposals, "proposals.rejected.>"); n != 2 {
		t.Fatalf("%d rejections, want 2", n)
	}
}
