package memory_test

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/schemas"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
)

// The committed types the writer does not receive can name no NPC: no property of their payload
// schema, at any depth, refers to an NPC or entity id (the writer remembers an event for the
// NPCs its ids name, never for its text), and a kind added later is received.
func TestSkippedTypesNameNoNPC(t *testing.T) {
	var refs func(v any) []string
	refs = func(v any) []string {
		var out []string
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if r, ok := x.(string); ok && k == "$ref" {
					out = append(out, r)
				}
				out = append(out, refs(x)...)
			}
		case []any:
			for _, x := range v {
				out = append(out, refs(x)...)
			}
		}
		return out
	}
	received := map[string]bool{}
	for _, s := range memory.Consumer().Subjects {
		received[s] = true
	}
	skipped := 0
	for _, k := range events.Kinds() {
		if received[events.CommittedSubject(k.DomainType)] {
			continue
		}
		skipped++
		if !memory.NamesNoNPC[k.DomainType] {
			t.Errorf("%s is not received and not in NamesNoNPC", k.DomainType)
		}
		raw, err := fs.ReadFile(schemas.FS(), schemas.ProposalPayload(k.Kind))
		if err != nil {
			t.Fatal(err)
		}
		var schema struct {
			Properties           map[string]any `json:"properties"`
			AdditionalProperties *bool          `json:"additionalProperties"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		if schema.AdditionalProperties == nil || *schema.AdditionalProperties {
			t.Errorf("%s: its payload admits properties its schema does not name", k.Kind)
		}
		if len(schema.Properties) == 0 {
			t.Errorf("%s: no properties read from its schema", k.Kind)
		}
		for name, p := range schema.Properties {
			for _, r := range refs(p) {
				if strings.HasSuffix(r, "/npc") || strings.HasSuffix(r, "/entity") {
					t.Errorf("%s: property %s refers to %s, so it can name an NPC and the memory-writer must receive %s", k.Kind, name, r, k.DomainType)
				}
			}
		}
	}
	if skipped != len(memory.NamesNoNPC) {
		t.Fatalf("%d types skipped, NamesNoNPC has %d", skipped, len(memory.NamesNoNPC))
	}
	if !received[events.CommittedSubject("NPCDialogueAccepted")] {
		t.Fatal("the writer does not receive dialogue")
	}
}
