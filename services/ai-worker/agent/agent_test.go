package agent_test

import (
	"testing"

	"github.com/worldgate/worldgate/services/ai-worker/agent"
)

func TestProposalIDsAreDeterministicPerRoleEventAndAttempt(t *testing.T) {
	a0 := agent.ProposalID("npc-dialogue", "e1", 0)
	if a0 != agent.ProposalID("npc-dialogue", "e1", 0) {
		t.Fatal("not deterministic")
	}
	seen := map[string]bool{}
	for _, id := range []string{a0, agent.ProposalID("npc-dialogue", "e1", 1), agent.ProposalID("npc-dialogue", "e1", 2),
		agent.ProposalID("ambience", "e1", 0), agent.ProposalID("npc-dialogue", "e2", 0)} {
		if seen[id] {
			t.Fatalf("id %s repeats", id)
		}
		seen[id] = true
	}
}
