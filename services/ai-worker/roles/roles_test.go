package roles_test

import (
	"encoding/json"
	"testing"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
)

func TestBindOverridesWhatTheModelSaysAboutIdentity(t *testing.T) {
	out, err := roles.Bind([]byte(`{"npcId":"npc:other","playerId":"player:eve","locationId":"loc:tavern","line":"Hi.","intent":"greet"}`),
		map[string]string{"npcId": "npc:mira", "playerId": "player:ada", "locationId": "loc:square"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	_ = json.Unmarshal(out, &got)
	if got["npcId"] != "npc:mira" || got["playerId"] != "player:ada" || got["locationId"] != "loc:square" || got["line"] != "Hi." {
		t.Fatalf("bound %s", out)
	}
	for _, bad := range []string{`[1]`, `null`, `"x"`, `{`} {
		if _, err := roles.Bind([]byte(bad), nil); err == nil {
			t.Errorf("Bind(%s) accepted", bad)
		}
	}
}

func TestRolesAreConsistent(t *testing.T) {
	for _, r := range roles.All() {
		if _, ok := events.LookupKind(r.Kind); !ok {
			t.Errorf("%s emits unknown kind %s", r.Name, r.Kind)
		}
		for _, req := range r.Required {
			if !r.Allows(req) {
				t.Errorf("%s requires %s, which is not on its allow-list", r.Name, req)
			}
		}
		if r.UsesLLM == (r.Template == "") {
			t.Errorf("%s: UsesLLM %v with template %q", r.Name, r.UsesLLM, r.Template)
		}
	}
	if _, err := roles.Select([]string{"ambience", "nope"}); err == nil {
		t.Error("unknown role selected")
	}
	env := &events.Envelope{Type: events.PlayerMoved, Payload: json.RawMessage(`{}`)}
	if _, err := roles.MustLookup(roles.NPCDialogue).Input(env); err == nil {
		t.Error("a role accepted another role's trigger")
	}
}
