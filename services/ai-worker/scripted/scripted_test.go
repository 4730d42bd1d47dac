package scripted_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/scripted"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/llm/prompt"
)

var ambienceTools = []llm.Tool{
	{Name: "get-location", Description: "Get a location by id", InputSchema: json.RawMessage(`{"type":"object","properties":{"locationId":{"type":"string","minLength":1}},"required":["locationId"],"additionalProperties":false}`)},
	{Name: "list-exits", Description: "List exits of a location", InputSchema: json.RawMessage(`{"type":"object","properties":{"locationId":{"type":"string"}},"required":["locationId"],"additionalProperties":false}`)},
	{Name: "search-lore", Description: "Search curated lore", InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","minLength":2},"limit":{"type":"integer","minimum":1,"maximum":10}},"required":["query"],"additionalProperties":false}`)},
	{Name: "list-recent-events", Description: "Recent committed events at a location", InputSchema: json.RawMessage(`{"type":"object","properties":{"locationId":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":20}},"required":["locationId"],"additionalProperties":false}`)},
}

const ambienceSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
 "properties":{"text":{"type":"string","minLength":10,"maxLength":600},
  "mood":{"type":"string","enum":["calm","tense","eerie","melancholy","festive","ominous","cozy","lively","desolate","mysterious"]}},
 "required":["text","mood"],"additionalProperties":false}`

const questSchema = `{"type":"object","properties":{
  "title":{"type":"string","minLength":3},"hook":{"type":"string","minLength":10},
  "objectives":{"type":"array","minItems":2,"maxItems":4,"items":{"type":"object","properties":{"description":{"type":"string"},"optional":{"type":"boolean"}},"required":["description"],"additionalProperties":false}},
  "locationId":{"type":"string"}},
 "required":["title","hook","objectives","locationId"],"additionalProperties":false}`

func ambienceRequest(loc string) *llm.Request {
	return &llm.Request{
		Purpose: roles.PurposeAmbience, Model: scripted.ModelSmall,
		System:   "You write short ambience for a location in a fantasy world.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: `The player entered locationId: "` + loc + `". Describe the scene.`}},
		Tools:    ambienceTools,
		Output:   &llm.OutputSchema{Name: "ambience", Schema: json.RawMessage(ambienceSchema)},
	}
}

// runLoop plays the agent: answers each tool call with results[tool].
func runLoop(t *testing.T, p llm.Provider, req *llm.Request, results map[string]string) (*llm.Response, []llm.ToolCall) {
	t.Helper()
	var calls []llm.ToolCall
	for range 4 {
		resp, err := p.Complete(context.Background(), req)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if len(resp.ToolCalls) == 0 {
			return resp, calls
		}
		calls = append(calls, resp.ToolCalls...)
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: resp.ToolCalls})
		for _, c := range resp.ToolCalls {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: results[c.Name]})
		}
	}
	t.Fatal("no final answer after 4 rounds")
	return nil, nil
}

var tavernResults = map[string]string{
	"get-location":       `{"id":"loc-tavern","name":"The Gilded Goose","description":"A crowded tavern with a roaring hearth and a bard tuning a lute.","npcs":[{"id":"npc-1","name":"Marta the Innkeeper"}]}`,
	"list-exits":         `{"exits":[{"direction":"north","to":"loc-square"},{"direction":"cellar","to":"loc-cellar"}]}`,
	"search-lore":        `{"results":[{"id":"lore-7","fact":"The Goose was built on the ruins of a smugglers' den.","score":0.9}]}`,
	"list-recent-events": `{"events":[]}`,
}

var cryptResults = map[string]string{
	"get-location":       `{"id":"loc-crypt","name":"The Sunken Crypt","description":"Cold water pools between cracked tombs; the torches gutter.","npcs":[]}`,
	"list-exits":         `{"exits":[{"direction":"up","to":"loc-chapel"}]}`,
	"search-lore":        `{"results":[{"id":"lore-2","fact":"The crypt flooded the night the abbot vanished.","score":0.8}]}`,
	"list-recent-events": `{"events":[{"type":"Player.Moved"}]}`,
}

func TestToolCallsThenContent(t *testing.T) {
	p := scripted.New(scripted.Options{})
	req := ambienceRequest("loc-tavern")
	first, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if first.FinishReason != llm.FinishToolCalls || len(first.ToolCalls) != len(ambienceTools) {
		t.Fatalf("first turn: want %d tool calls, got %+v", len(ambienceTools), first)
	}
	byName := map[string]llm.Tool{}
	for _, tl := range ambienceTools {
		byName[tl.Name] = tl
	}
	for _, c := range first.ToolCalls {
		if c.ID == "" {
			t.Errorf("tool call %s has no id", c.Name)
		}
		if err := llm.ValidateJSON(byName[c.Name].InputSchema, c.Args); err != nil {
			t.Errorf("args of %s do not validate: %v (%s)", c.Name, err, c.Args)
		}
		var a map[string]any
		_ = json.Unmarshal(c.Args, &a)
		if id, ok := a["locationId"]; ok && id != "loc-tavern" {
			t.Errorf("%s: locationId = %v, want the one the prompt mentions", c.Name, id)
		}
	}
	if first.Usage.PromptTokens <= 0 || first.Usage.CompletionTokens <= 0 {
		t.Errorf("usage not estimated: %+v", first.Usage)
	}

	resp, _ := runLoop(t, p, ambienceRequest("loc-tavern"), tavernResults)
	if resp.FinishReason != llm.FinishStop {
		t.Fatalf("final finish reason = %s", resp.FinishReason)
	}
	if err := llm.ValidateJSON(json.RawMessage(ambienceSchema), []byte(resp.Text)); err != nil {
		t.Fatalf("answer does not validate: %v\n%s", err, resp.Text)
	}
	var out struct{ Text, Mood string }
	_ = json.Unmarshal([]byte(resp.Text), &out)
	if !strings.Contains(out.Text, "Gilded Goose") {
		t.Errorf("ambience does not use the location's name from the tool result: %q", out.Text)
	}
	n := strings.Count(out.Text, ".") + strings.Count(out.Text, "!")
	if n < 1 || n > 4 {
		t.Errorf("want 1-3 sentences, got %q", out.Text)
	}
	t.Logf("ambience: %s", resp.Text)
}

func TestDeterministic(t *testing.T) {
	p1 := scripted.New(scripted.Options{})
	p2 := scripted.New(scripted.Options{})
	a, _ := runLoop(t, p1, ambienceRequest("loc-tavern"), tavernResults)
	b, _ := runLoop(t, p2, ambienceRequest("loc-tavern"), tavernResults)
	a.Latency, b.Latency = 0, 0
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same request, different answers:\n%+v\n%+v", a, b)
	}
}

func TestContentVariesWithContext(t *testing.T) {
	p := scripted.New(scripted.Options{})
	a, _ := runLoop(t, p, ambienceRequest("loc-tavern"), tavernResults)
	b, _ := runLoop(t, p, ambienceRequest("loc-crypt"), cryptResults)
	if a.Text == b.Text {
		t.Fatalf("different contexts, same text: %s", a.Text)
	}
	if !strings.Contains(b.Text, "Sunken Crypt") {
		t.Errorf("crypt ambience does not mention the crypt: %s", b.Text)
	}
	// Across many locations the texts are varied, not one template.
	seen := map[string]bool{}
	for _, loc := range []string{"mill", "bridge", "chapel", "harbour", "forge", "orchard", "gate", "well"} {
		res := map[string]string{"get-location": `{"id":"loc-` + loc + `","name":"The ` + loc + `","description":"A quiet ` + loc + ` at the edge of town."}`}
		r, _ := runLoop(t, p, ambienceRequest("loc-"+loc), res)
		var out struct{ Text string }
		_ = json.Unmarshal([]byte(r.Text), &out)
		seen[strings.ReplaceAll(out.Text, loc, "X")] = true
	}
	if len(seen) < 4 {
		t.Errorf("texts barely vary across 8 locations: %d distinct", len(seen))
	}
}

func TestQuestSeedSchema(t *testing.T) {
	p := scripted.New(scripted.Options{})
	req := &llm.Request{
		Purpose: roles.PurposeQuestSeed, Model: scripted.ModelLarge,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: `Seed a quest near locationId: "loc-tavern".`}},
		Tools:    ambienceTools,
		Output:   &llm.OutputSchema{Name: "quest_seed", Schema: json.RawMessage(questSchema)},
	}
	resp, _ := runLoop(t, p, req, tavernResults)
	if err := llm.ValidateJSON(json.RawMessage(questSchema), []byte(resp.Text)); err != nil {
		t.Fatalf("quest does not validate: %v\n%s", err, resp.Text)
	}
	var q struct {
		Title, Hook, LocationID string
		Objectives              []struct{ Description string }
	}
	_ = json.Unmarshal([]byte(resp.Text), &q)
	if len(q.Objectives) < 2 || len(q.Objectives) > 4 || q.LocationID != "loc-tavern" {
		t.Errorf("quest: %+v", q)
	}
	t.Logf("quest: %s", resp.Text)
}

func TestDialogueWithoutSchema(t *testing.T) {
	p := scripted.New(scripted.Options{})
	req := &llm.Request{
		Purpose:  roles.PurposeNPCDialogue,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "npcId: npc-1\nThe player says:\n\"Any work around here?\""}},
	}
	resp, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Line, Intent string }
	if err := json.Unmarshal([]byte(resp.Text), &d); err != nil || d.Line == "" || d.Intent == "" {
		t.Fatalf("dialogue: %q (%v)", resp.Text, err)
	}
}

func TestToolCallsPerTurnSteersTheScript(t *testing.T) {
	p := scripted.New(scripted.Options{ToolCallsPerTurn: 10, MaxToolRounds: 100})
	req := ambienceRequest("loc-tavern")
	resp, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 10 {
		t.Fatalf("want 10 tool calls, got %d", len(resp.ToolCalls))
	}
	ids := map[string]bool{}
	for _, c := range resp.ToolCalls {
		if ids[c.ID] {
			t.Fatalf("duplicate tool call id %s", c.ID)
		}
		ids[c.ID] = true
	}
	// It keeps asking on the next turn too: only the agent's budget stops it.
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: resp.ToolCalls[:6]})
	for _, c := range resp.ToolCalls[:6] {
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: `{}`})
	}
	again, err := p.Complete(context.Background(), req)
	if err != nil || len(again.ToolCalls) == 0 {
		t.Fatalf("second turn: %v %+v", err, again)
	}
}

func TestInjectedFailures(t *testing.T) {
	p := scripted.New(scripted.Options{Fail: &llm.Error{Kind: llm.KindRateLimit}, FailTimes: 2})
	req := ambienceRequest("loc-tavern")
	for i := range 2 {
		_, err := p.Complete(context.Background(), req)
		var le *llm.Error
		if !errors.As(err, &le) || le.Kind != llm.KindRateLimit || le.Provider != "scripted" {
			t.Fatalf("call %d: want rate_limit_exceeded, got %v", i, err)
		}
	}
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatalf("third call should succeed: %v", err)
	}
}

func TestStreamMatchesComplete(t *testing.T) {
	p := scripted.New(scripted.Options{MaxToolRounds: -1})
	req := ambienceRequest("loc-tavern")
	want, _ := p.Complete(context.Background(), req)
	var b strings.Builder
	got, err := p.Stream(context.Background(), req, func(d llm.Delta) error { b.WriteString(d.Text); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != want.Text || got.Text != want.Text {
		t.Fatalf("streamed %q, want %q", b.String(), want.Text)
	}
}

func TestContextLength(t *testing.T) {
	p := scripted.New(scripted.Options{MaxContext: 10})
	_, err := p.Complete(context.Background(), ambienceRequest("loc-tavern"))
	if llm.KindOf(err) != llm.KindContextLength {
		t.Fatalf("want context_length_exceeded, got %v", err)
	}
}

// Quest objectives never repeat, whatever the context (an item in the results used to put the
// closing "Return to …" objective in twice).
func TestQuestObjectivesAreDistinct(t *testing.T) {
	p := scripted.New(scripted.Options{})
	results := maps.Clone(tavernResults)
	results["get-location"] = `{"id":"loc-mine","name":"The Deep Mine","description":"Tunnels of warm red rock.","npcs":[{"name":"Ivy Flint"}],"items":[{"name":"a miner's lamp"}]}`
	for i := range 60 {
		req := &llm.Request{
			Purpose: roles.PurposeQuestSeed, Model: scripted.ModelLarge,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprintf("Seed quest %d near locationId: \"loc-mine\".", i)}},
			Tools:    ambienceTools,
		}
		resp, _ := runLoop(t, p, req, results)
		var q struct{ Objectives []string }
		if err := json.Unmarshal([]byte(resp.Text), &q); err != nil || len(q.Objectives) < 3 {
			t.Fatalf("quest %d: %s (%v)", i, resp.Text, err)
		}
		seen := map[string]bool{}
		for _, o := range q.Objectives {
			if seen[o] {
				t.Fatalf("quest %d repeats %q: %v", i, o, q.Objectives)
			}
			seen[o] = true
		}
	}
}

// A hostile player's words come back quoted in the NPC's line (what the safety gate is there
// to catch); once a validator has refused that, the reprompt answers without quoting.
func TestHostileWordsQuotedUntilRefused(t *testing.T) {
	p := scripted.New(scripted.Options{})
	said := prompt.Data("player_said", "You worthless idiot, pay up or else.")
	ask := func(extra ...string) string {
		content := strings.Join(append([]string{"npcId: npc-1", said.String()}, extra...), "\n")
		req := &llm.Request{Purpose: roles.PurposeNPCDialogue, Messages: []llm.Message{
			{Role: llm.RoleUser, Content: content},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "classify-intent", Args: json.RawMessage(`{}`)}}},
			{Role: llm.RoleTool, ToolCallID: "c1", Name: "classify-intent", Content: `{"alternatives":[{"confidence":0.48,"intent":"ask_about"}],"confidence":0.68,"intent":"threaten"}`},
		}}
		resp, err := p.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var d struct{ Line, Intent string }
		if err := json.Unmarshal([]byte(resp.Text), &d); err != nil {
			t.Fatal(err)
		}
		if d.Intent != "warn" && d.Intent != "refuse" {
			t.Errorf("intent %q for a threat", d.Intent)
		}
		return d.Line
	}
	if line := ask(); !strings.Contains(line, "worthless idiot") {
		t.Fatalf("first answer does not quote the player: %q", line)
	}
	refused := prompt.Data("rejection_reason", "safety gate, SAFETY_FLAGGED: The text was flagged for harassment.")
	if line := ask(refused.String()); strings.Contains(line, "worthless") {
		t.Fatalf("the reprompt quotes the player again: %q", line)
	}
}

// A tool that wants one of two properties ("give factId or topic", as oneOf of required
// lists) is called with exactly one, valid against its schema; with nothing in the prompt to
// fill an id, the model asks by topic.
func TestOneOfRequiredToolArgs(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","additionalProperties":false,
	 "properties":{"factId":{"type":"string","minLength":1},"topic":{"type":"string","minLength":1}},
	 "oneOf":[{"required":["factId"]},{"required":["topic"]}]}`)
	tools := []llm.Tool{{Name: "get-canonical-fact", Description: "A lore fact by id or topic", InputSchema: schema}}
	for _, c := range []struct{ prompt, want string }{
		{`Describe locationId: "loc:forge-row".`, "topic"},
		{`Tell the lore of factId: "lore:sundering".`, "factId"},
	} {
		p := scripted.New(scripted.Options{})
		resp, err := p.Complete(context.Background(), &llm.Request{Purpose: roles.PurposeAmbience,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: c.prompt}}, Tools: tools})
		if err != nil || len(resp.ToolCalls) != 1 {
			t.Fatalf("%s: %v %+v", c.prompt, err, resp)
		}
		args := resp.ToolCalls[0].Args
		if err := llm.ValidateJSON(schema, args); err != nil {
			t.Fatalf("%s: args %s do not validate: %v", c.prompt, args, err)
		}
		var got map[string]string
		_ = json.Unmarshal(args, &got)
		if len(got) != 1 || got[c.want] == "" {
			t.Errorf("%s: args %s, want only %s", c.prompt, args, c.want)
		}
	}
}

// A tool whose properties are all optional ("give factId or topic", said only in words) is not
// called with no arguments: with no id in the prompt the model asks by topic.
func TestAllOptionalToolAsksByFreeText(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","additionalProperties":false,
	 "properties":{"factId":{"type":"string"},"topic":{"type":"string"}}}`)
	p := scripted.New(scripted.Options{})
	resp, err := p.Complete(context.Background(), &llm.Request{Purpose: roles.PurposeAmbience,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: `Describe locationId: "loc:forge-row".`}},
		Tools:    []llm.Tool{{Name: "get-canonical-fact", InputSchema: schema}}})
	if err != nil || len(resp.ToolCalls) != 1 {
		t.Fatalf("%v %+v", err, resp)
	}
	var got map[string]string
	_ = json.Unmarshal(resp.ToolCalls[0].Args, &got)
	if len(got) != 1 || got["topic"] == "" {
		t.Fatalf("args %s, want a topic only", resp.ToolCalls[0].Args)
	}
}
