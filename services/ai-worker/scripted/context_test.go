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

// Offered the conversation-memory tool, the script asks for it too (beyond the default cap),
// and with the pair's last exchange in the results the NPC picks up what the player said last
// time; without a memory, or for a hostile player, it does not.
func TestDialogueRemembersTheLastExchange(t *testing.T) {
	p := scripted.New(scripted.Options{})
	id := json.RawMessage(`{"type":"object","properties":{"npcId":{"type":"string","minLength":1},"playerId":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":20}},"required":["npcId","playerId"],"additionalProperties":false}`)
	loc := json.RawMessage(`{"type":"object","properties":{"locationId":{"type":"string","minLength":1}},"required":["locationId"],"additionalProperties":false}`)
	tools := []llm.Tool{{Name: "classify-intent", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","minLength":1}},"required":["text"]}`)},
		{Name: "get-canonical-fact", InputSchema: json.RawMessage(`{"type":"object","properties":{"factId":{"type":"string","minLength":1}},"required":["factId"]}`)},
		{Name: "get-location", InputSchema: loc}, {Name: "get-player-state", InputSchema: json.RawMessage(`{"type":"object","properties":{"playerId":{"type":"string","minLength":1}},"required":["playerId"]}`)},
		{Name: "get-recent-dialogue", InputSchema: id}, {Name: "search-lore", InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","minLength":2}},"required":["query"]}`)}}
	user := "npcId: npc:mira\nplayerId: player:ada\nlocationId: loc:square\n" + prompt.Data("player_said", "Any news today?").String()
	first, err := p.Complete(context.Background(), &llm.Request{Purpose: roles.PurposeNPCDialogue, Model: scripted.ModelSmall,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: user}}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	var memoryCall *llm.ToolCall
	for i, c := range first.ToolCalls {
		if c.Name == "get-recent-dialogue" {
			memoryCall = &first.ToolCalls[i]
		}
	}
	if len(first.ToolCalls) != scripted.DefaultToolCalls+1 || memoryCall == nil ||
		llm.ValidateJSON(id, memoryCall.Args) != nil || !strings.Contains(string(memoryCall.Args), `"npc:mira"`) {
		t.Fatalf("tool calls %+v, want the default %d and get-recent-dialogue for mira and ada", first.ToolCalls, scripted.DefaultToolCalls)
	}
	line := func(intent, memory string) string {
		t.Helper()
		msgs := []llm.Message{{Role: llm.RoleUser, Content: user},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "classify-intent"}, {ID: "c2", Name: "get-recent-dialogue"}}},
			{Role: llm.RoleTool, ToolCallID: "c1", Name: "classify-intent", Content: `{"intent":"` + intent + `"}`},
			{Role: llm.RoleTool, ToolCallID: "c2", Name: "get-recent-dialogue", Content: memory}}
		resp, err := p.Complete(context.Background(), &llm.Request{Purpose: roles.PurposeNPCDialogue, Model: scripted.ModelSmall, Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		var d struct{ Line string }
		if err := json.Unmarshal([]byte(resp.Text), &d); err != nil {
			t.Fatal(err)
		}
		return d.Line
	}
	remembered := `{"npcId":"npc:mira","playerId":"player:ada","exchanges":[{"eventId":"e2","playerSaid":"Where is the old mill? I lost my way.","npcLine":"North."},{"eventId":"e1","playerSaid":"Hello.","npcLine":"Hi."}],"aroundNpc":[{"type":"NPCDialogueAccepted","text":"said to player:bo: \"Go away.\""}]}`
	if l := line("ask", remembered); !strings.Contains(l, "“Where is the old mill?”") || strings.Contains(l, "Go away") {
		t.Errorf("with a memory: %q, want the player's last words quoted (and not the notes as scenery)", l)
	}
	if l := line("ask", `{"npcId":"npc:mira","playerId":"player:ada","exchanges":[],"aroundNpc":[]}`); strings.Contains(l, "Last time") || strings.Contains(l, "last we spoke") {
		t.Errorf("without a memory: %q", l)
	}
	if l := line("insult", remembered); strings.Contains(l, "old mill") {
		t.Errorf("a hostile player's earlier words came back: %q", l)
	}
}
