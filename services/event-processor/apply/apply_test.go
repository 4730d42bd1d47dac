package apply

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
)

func TestEveryKindHasAMapping(t *testing.T) {
	if got, want := len(Kinds()), len(events.Kinds()); got != want {
		t.Fatalf("%d of %d kinds mapped", got, want)
	}
}

func TestBuild(t *testing.T) {
	p := &events.Proposal{ProposalID: "p1", Kind: events.KindPlayerMoved,
		Payload: json.RawMessage(`{"playerId":"player:a","fromLocationId":"loc:x","toLocationId":"loc:y","direction":"north"}`)}
	cmds, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 1 || cmds[0].Type != "PlayerMoved" || cmds[0].EventID != events.DomainEventID("p1", 0) {
		t.Fatalf("%+v", cmds)
	}
	if r := strings.Join(cmds[0].Reasons(), " | "); !strings.Contains(r, "is not at loc:x") || !strings.Contains(r, "no exit north to loc:y") {
		t.Fatalf("move guards: %s", r)
	}
	for _, bad := range []*events.Proposal{
		{ProposalID: "p2", Kind: "teleport", Payload: json.RawMessage(`{}`)},
		{ProposalID: "p3", Kind: events.KindAmbience, Payload: json.RawMessage(`{"locationId":"loc:x","text":"t","mood":"m","extra":1}`)},
		{ProposalID: "p4", Kind: events.KindAmbience, Payload: json.RawMessage(`[]`)},
	} {
		if _, err := Build(bad); err == nil {
			t.Errorf("%s (%s) was accepted", bad.ProposalID, bad.Payload)
		}
	}
}

func TestReadDecision(t *testing.T) {
	d, err := ReadDecision([]any{map[any]any{"label": LabelConflict, "source": "PROPOSALS:7", "committedUtc": "x", "reason": "why"}})
	if err != nil || d.Applied || d.Source != "PROPOSALS:7" || d.Reason != "why" {
		t.Fatalf("%+v %v", d, err)
	}
	if _, err := ReadDecision([]any{map[any]any{"label": "Location"}}); err == nil {
		t.Fatal("a non-marker vertex was accepted")
	}
	if _, err := ReadDecision(nil); err == nil {
		t.Fatal("no result was accepted")
	}
}
