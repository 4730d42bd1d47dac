package events_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
)

// provenance.inputRail is a schemaVersion 2 field: a v2 proposal carries it, a v1 proposal
// (in flight from before the upgrade) still decodes without it and is refused with it.
func TestInputRailIsVersioned(t *testing.T) {
	p := events.Proposal{ProposalID: "p-1", Kind: events.KindNPCDialogue, SchemaVersion: events.ProposalSchemaVersion,
		CorrelationID: "c-1", CausationID: "e-1", AgentRole: "npc-dialogue", Actor: events.Actor{Kind: "player", ID: "player:ada"},
		Payload:    json.RawMessage(`{"npcId":"npc:mira","playerId":"player:ada","locationId":"loc:square","line":"Aye.","intent":"greet"}`),
		Provenance: &events.Provenance{Provider: "fallback", Model: "static-table", InputRail: &events.InputRail{PolicyVersion: "worldgate-moderation-2.0.0", Flagged: []string{"harassment", "pii"}, Blocked: []string{"harassment"}, Redactions: []events.Redaction{{Field: "player_said", Kind: "email", Count: 1}}}},
		Route:      events.Route{Pending: []string{"schema"}}, CreatedUTC: time.Now().UTC()}
	raw, _ := json.Marshal(p)
	got, err := events.DecodeProposal(raw)
	if err != nil || got.Provenance.InputRail == nil || got.Provenance.InputRail.Redactions[0].Kind != "email" {
		t.Fatalf("v2 with inputRail: %v %+v", err, got)
	}
	p.SchemaVersion = "1"
	raw, _ = json.Marshal(p)
	if _, err := events.DecodeProposal(raw); err == nil || !strings.Contains(err.Error(), "inputRail") {
		t.Fatalf("v1 with inputRail: %v", err)
	}
	p.Provenance.InputRail = nil
	raw, _ = json.Marshal(p)
	if _, err := events.DecodeProposal(raw); err != nil {
		t.Fatalf("v1 without inputRail: %v", err)
	}
	// A bad rail: unknown field, missing policy version.
	for _, bad := range []string{`{"policyVersion":"x","extra":1}`, `{"flagged":["hate"]}`, `{"policyVersion":"x","redactions":[{"field":"f","kind":"email","count":0}]}`} {
		p.SchemaVersion = events.ProposalSchemaVersion
		m := map[string]any{}
		raw, _ = json.Marshal(p)
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		m["provenance"].(map[string]any)["inputRail"] = json.RawMessage(bad)
		raw, _ = json.Marshal(m)
		if _, err := events.DecodeProposal(raw); err == nil {
			t.Errorf("rail %s accepted", bad)
		}
	}
}

// playerSaid (schemaVersion 4) is refused on an older version's proposal, which still decodes
// without it.
func TestPlayerSaidIsVersioned(t *testing.T) {
	p := events.Proposal{ProposalID: "p-2", Kind: events.KindNPCDialogue, SchemaVersion: events.ProposalSchemaVersion,
		CorrelationID: "c-2", CausationID: "e-2", AgentRole: "npc-dialogue", Actor: events.Actor{Kind: "player", ID: "player:ada"},
		Payload:    json.RawMessage(`{"npcId":"npc:mira","playerId":"player:ada","locationId":"loc:square","line":"Aye.","intent":"greet","playerSaid":"Hello there."}`),
		Provenance: &events.Provenance{Provider: "scripted", Model: "scripted-small"},
		Route:      events.Route{Pending: []string{"schema"}}, CreatedUTC: time.Now().UTC()}
	raw, _ := json.Marshal(p)
	if _, err := events.DecodeProposal(raw); err != nil {
		t.Fatalf("v%s with playerSaid: %v", events.ProposalSchemaVersion, err)
	}
	p.SchemaVersion = "3"
	raw, _ = json.Marshal(p)
	if _, err := events.DecodeProposal(raw); err == nil || !strings.Contains(err.Error(), "playerSaid") {
		t.Fatalf("v3 with playerSaid: %v", err)
	}
	p.Payload = json.RawMessage(`{"npcId":"npc:mira","playerId":"player:ada","locationId":"loc:square","line":"Aye.","intent":"greet"}`)
	raw, _ = json.Marshal(p)
	if _, err := events.DecodeProposal(raw); err != nil || !events.ProposalSchemaAccepted("3") {
		t.Fatalf("v3 without playerSaid: %v (accepted %v)", err, events.ProposalSchemaAccepted("3"))
	}
}
