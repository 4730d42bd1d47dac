package scripted_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/scripted"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/llm/prompt"
)

// One NPC's dialogue varies with who speaks, what they said and what the tools returned, the
// way a real model's does (issue #20: near-identical lines made the dedup gate refuse 64 % of
// the bench's events), and stays deterministic: the same request, the same line.
func TestDialogueVariesWithWhoAndWhat(t *testing.T) {
	p := scripted.New(scripted.Options{})
	line := func(player, said, lore string) string {
		t.Helper()
		req := &llm.Request{Purpose: roles.PurposeNPCDialogue, Model: scripted.ModelSmall, Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "npcId: npc:mira\nplayerId: " + player + "\nlocationId: loc:square\n" + prompt.Data("player_said", said).String()},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "search-lore", Args: json.RawMessage(`{}`)}}},
			{Role: llm.RoleTool, ToolCallID: "c1", Name: "search-lore", Content: `{"facts":[{"fact":"` + lore + `"}]}`},
		}}
		resp, err := p.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var d struct{ Line string }
		if err := json.Unmarshal([]byte(resp.Text), &d); err != nil || d.Line == "" {
			t.Fatalf("dialogue %q (%v)", resp.Text, err)
		}
		return d.Line
	}
	lines := map[string]bool{}
	for _, player := range []string{"player:ada", "player:bo", "player:cy"} {
		for _, said := range []string{"What news of the mountain pass?", "Where can I buy rope and lanterns?", "Have you seen the silver fox?"} {
			for _, lore := range []string{"The old mine flooded in the year of ash.", "The Choir sings beneath the town at night."} {
				l := line(player, said, lore)
				if l != line(player, said, lore) {
					t.Fatalf("same request, different lines")
				}
				lines[l] = true
			}
		}
	}
	if len(lines) < 16 {
		t.Errorf("18 contexts gave only %d distinct lines", len(lines))
	}
	// What the player asked about comes back in the answer.
	hits := 0
	for _, said := range []string{"What news of the mountain pass?", "Where can I buy rope and lanterns?", "Have you seen the silver fox?"} {
		l := line("player:ada", said, "The old mine flooded in the year of ash.")
		for _, w := range []string{"mountain pass", "rope", "silver fox"} {
			if strings.Contains(strings.ToLower(l), w) {
				hits++
			}
		}
	}
	if hits == 0 {
		t.Errorf("no answer takes up what the player asked about")
	}
}
