package telemetry

import (
	"strings"
	"testing"
)

func TestCatalogNamesAreUniqueWellFormedAndDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Catalog() {
		if seen[e.Name] {
			t.Errorf("%s is catalogued twice", e.Name)
		}
		seen[e.Name] = true
		if !LooksLikeEvent(e.Name) || e.Emitter == "" || e.Meaning == "" || len(e.Required) == 0 {
			t.Errorf("%+v: want a dotted name, an emitter, a meaning and required keys", e)
		}
	}
	for _, name := range []string{PromptIssued, PromptRejected, GateRejected, CommitApplied, DeadLettered} {
		if !seen[name] {
			t.Errorf("%s is not catalogued", name)
		}
	}
	// The design's AI invocation events carry every required ai.* dimension.
	for _, name := range []string{PromptIssued, PromptRejected, PromptFallback} {
		e, _ := Lookup(name)
		for _, k := range RequiredAI {
			if !strings.Contains(strings.Join(e.Required, " "), k) {
				t.Errorf("%s does not require %s", name, k)
			}
		}
	}
}

func TestCheck(t *testing.T) {
	issued := map[string]any{"msg": PromptIssued, KeyCorrelationID: "c", KeyProposalID: "p", DimCacheHit: false,
		DimRetryCount: 0, DimTemplateVersion: "npc@1"}
	for _, k := range RequiredAI {
		issued[k] = 1
	}
	for _, tc := range []struct {
		name   string
		record map[string]any
		want   string // substring of the error; "" for none
	}{
		{"complete AI event", issued, ""},
		{"sentence", map[string]any{"msg": "worker starting"}, ""},
		{"uncatalogued name", map[string]any{"msg": "Prompt.Genesis.Invented"}, "not in the telemetry catalog"},
		{"missing dimension", without(issued, DimModerationFlagged), "lacks [ai.moderation.flagged]"},
		{"gate rejection without code", map[string]any{"msg": GateRejected, KeyCorrelationID: "c", KeyProposalID: "p", KeyGate: "safety"}, "lacks [code]"},
	} {
		err := Check(tc.record)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func without(m map[string]any, key string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}
