package worldfile

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
)

func route(string) ([]string, error) { return []string{"schema", "invariant", "audit"}, nil }

func TestDemoWorldIsValidAndRich(t *testing.T) {
	w, err := DemoWorld()
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "ashfall" || len(w.Locations) < 12 || len(w.NPCs) < 8 || len(w.Factions) < 3 || len(w.Players) < 2 || len(w.Items) < 5 || len(w.Lore) < 8 {
		t.Fatalf("demo world too small: %d locations, %d NPCs, %d factions, %d players, %d items, %d lore",
			len(w.Locations), len(w.NPCs), len(w.Factions), len(w.Players), len(w.Items), len(w.Lore))
	}
	ps, err := Proposals(w, route)
	if err != nil {
		t.Fatal(err)
	}
	// Every exit has its way back, and every location is reachable from the gate.
	exits := map[string]map[string]bool{}
	kinds := map[string]int{}
	for _, p := range ps {
		kinds[p.Kind]++
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := events.DecodeProposal(data); err != nil {
			t.Fatalf("proposal %s does not pass the contract: %v", p.ProposalID, err)
		}
		if p.AgentRole != "world-loader" || p.Actor.Kind != "operator" || strings.Join(p.Route.Pending, ",") != "schema,invariant,audit" {
			t.Fatalf("proposal %+v", p)
		}
		if p.Kind == events.KindExitAdded {
			var x struct{ FromLocationID, ToLocationID string }
			_ = json.Unmarshal(p.Payload, &x)
			if exits[x.FromLocationID] == nil {
				exits[x.FromLocationID] = map[string]bool{}
			}
			exits[x.FromLocationID][x.ToLocationID] = true
		}
	}
	for from, tos := range exits {
		for to := range tos {
			if !exits[to][from] {
				t.Errorf("exit %s → %s has no way back", from, to)
			}
		}
	}
	seen := map[string]bool{"loc:ash-gate": true}
	queue := []string{"loc:ash-gate"}
	for len(queue) > 0 {
		at := queue[0]
		queue = queue[1:]
		for to := range exits[at] {
			if !seen[to] {
				seen[to] = true
				queue = append(queue, to)
			}
		}
	}
	if len(seen) != len(w.Locations) {
		t.Errorf("%d of %d locations reachable from the gate", len(seen), len(w.Locations))
	}
	if kinds[events.KindLocationCreated] != len(w.Locations) || kinds[events.KindNPCCreated] != len(w.NPCs) || kinds[events.KindLoreFactAdded] != len(w.Lore) {
		t.Fatalf("kinds %v", kinds)
	}
	// Ordered so that what is referenced comes first.
	if ps[0].Kind != events.KindFactionCreated || ps[len(ps)-1].Kind != events.KindLoreFactAdded {
		t.Fatalf("order: first %s, last %s", ps[0].Kind, ps[len(ps)-1].Kind)
	}
}

func TestProposalIDsAreDeterministic(t *testing.T) {
	w1, err1 := DemoWorld()
	w2, err2 := DemoWorld()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	a, err1 := Proposals(w1, route)
	b, err2 := Proposals(w2, route)
	if err1 != nil || err2 != nil || len(a) == 0 || len(a) != len(b) {
		t.Fatal(err1, err2, len(a), len(b))
	}
	ids := map[string]bool{}
	for i := range a {
		if a[i].ProposalID != b[i].ProposalID {
			t.Fatalf("proposal %d: %s then %s", i, a[i].ProposalID, b[i].ProposalID)
		}
		if ids[a[i].ProposalID] {
			t.Fatalf("duplicate proposal id %s", a[i].ProposalID)
		}
		ids[a[i].ProposalID] = true
	}
	if a[0].ProposalID != "world:ashfall:faction_created:faction:wardens" {
		t.Fatalf("id %s", a[0].ProposalID)
	}
	if id := ProposalID("w", "k", strings.Repeat("x", 200)); len(id) > 128 || id != ProposalID("w", "k", strings.Repeat("x", 200)) {
		t.Fatalf("long id %s", id)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown field", "locations:\n  - id: loc:a\n    name: A\n    description: d\n    colour: red\n", "w.yaml:5: field colour"},
		{"duplicate id", "locations:\n  - {id: loc:a, name: A, description: d}\n  - {id: loc:a, name: B, description: d}\n", "w.yaml:3: id loc:a is already defined on line 2"},
		{"dangling exit", "locations:\n  - id: loc:a\n    name: A\n    description: d\n    exits:\n      - {direction: north, to: loc:b}\n", "w.yaml:6: exit north destination loc:b is not defined"},
		{"exit clash", "locations:\n  - id: loc:a\n    name: A\n    description: d\n    exits:\n      - {direction: north, to: loc:b, back: south}\n  - id: loc:b\n    name: B\n    description: d\n    exits:\n      - {direction: south, to: loc:a}\n", "w.yaml:11: loc:b already has an exit south (line 6)"},
		{"npc without location", "npcs:\n  - {id: npc:x, name: X}\n", "w.yaml:2: location of npc:x is required"},
		{"bad prefix", "factions:\n  - {id: fac:x, name: X}\n", `w.yaml:2: id "fac:x" must start with "faction:"`},
		{"schema", "locations:\n  - {id: loc:a, name: A, description: ''}\n", "w.yaml:2: location_created loc:a"},
		{"bad direction", "locations:\n  - id: loc:a\n    name: A\n    description: d\n    exits:\n      - {direction: sideways, to: loc:b}\n  - {id: loc:b, name: B, description: d}\n", "w.yaml:6: exit_added"},
		{"not yaml", "locations: [\n", "w.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("w.yaml", []byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}
