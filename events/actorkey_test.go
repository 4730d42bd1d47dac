package events_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
)

// A proposal as the gates and the event-processor see it: the actor near the start, then the
// payload, the route's trail and the attestations.
func attestedProposalJSON(tb testing.TB) []byte {
	tb.Helper()
	p := map[string]any{
		"proposalId": "0f78fd62-2c08-5f95-904d-5db3a39fa1a6", "kind": "player_moved", "schemaVersion": "4",
		"correlationId": "chaos-1795672172278299972-523", "causationId": "5358f5a6-c2cc-522b-834f-8572d9822187",
		"agentRole": "world-rules", "actor": map[string]string{"kind": "player", "id": "player:bench-123"},
		"payload": map[string]string{"playerId": "player:bench-123", "fromLocationId": "loc:bench-yard", "toLocationId": "loc:bench-hall", "direction": "north"},
		"route":   map[string]any{"pending": []string{}, "passed": []string{"schema", "invariant", "rate", "audit"}},
		"attestations": []map[string]string{
			{"gate": "schema", "sig": strings.Repeat("A", 88)}, {"gate": "invariant", "sig": strings.Repeat("B", 88)},
			{"gate": "rate", "sig": strings.Repeat("C", 88)}, {"gate": "audit", "sig": strings.Repeat("D", 88)},
		},
		"provenance": map[string]any{"templateId": "rules", "toolCalls": []map[string]string{{"tool": "list-exits", "resultHash": strings.Repeat("e", 64)}}},
	}
	data, err := json.Marshal(p)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func TestActorKey(t *testing.T) {
	for _, c := range []struct {
		data, want string
	}{
		{string(attestedProposalJSON(t)), "player:player:bench-123"},
		{`{"kind":"x","actor":{"kind":"operator","id":"ops"}}`, "operator:ops"},
		{`{"actor":{"id":"ops","kind":"operator"},"actor2":1}`, "operator:ops"},
		{`{"kind":"x","payload":{"actor":{"kind":"player","id":"nested"}}}`, ""},
		{`{"kind":"x"}`, ""},
		{`{"actor":{"kind":"player"}}`, ""},
		{`not json`, ""},
		{`[1,2]`, ""},
		{``, ""},
	} {
		if got := events.ActorKey("", []byte(c.data)); got != c.want {
			t.Errorf("ActorKey(%.60q) = %q, want %q", c.data, got, c.want)
		}
	}
}

func BenchmarkActorKey(b *testing.B) {
	data := attestedProposalJSON(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if events.ActorKey("", data) == "" {
			b.Fatal("no actor")
		}
	}
}
