package gates_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/gates"
)

// quiet refuses ambience that shouts.
type quiet struct{}

func (quiet) Name() string { return "quiet" }

func (quiet) Check(_ context.Context, p *events.Proposal) (gates.Decision, error) {
	payload, err := events.DecodePayload(p.Kind, p.Payload)
	if err != nil {
		return gates.Reject(events.CodeSchemaInvalid, "The payload cannot be read: "+err.Error(), nil), nil
	}
	for _, r := range payload.Content() {
		if r == '!' {
			return gates.Reject(events.CodeSafetyFlagged, "Ambience does not shout: remove the exclamation marks.", nil), nil
		}
	}
	return gates.Pass(), nil
}

// A gate is a Name and a Check; its Spec is all the rest of Worldgate needs to run it (the
// NATS user, the signing key, the dev stack derive from it): define it on the registry the
// process runs (Registry.Define, or a line in builtin, registry.go, for a built-in gate) and
// give it a place in routes.yaml.
func Example_gate() {
	spec := gates.Spec{Name: "quiet", Summary: "ambience does not shout",
		New: func(context.Context, gates.Deps) (gates.Gate, error) { return quiet{}, nil }}
	reg := gates.Builtin()
	if err := reg.Define(spec); err != nil {
		fmt.Println(err)
	}

	g, _ := spec.New(context.Background(), gates.Deps{})
	for _, text := range []string{"Rain drums on the slate roofs.", "FIRE! FIRE!"} {
		raw, _ := json.Marshal(&events.AmbiencePayload{LocationID: "loc:square", Text: text, Mood: "calm"})
		d, _ := g.Check(context.Background(), &events.Proposal{Kind: events.KindAmbience, Payload: raw})
		fmt.Println(strings.TrimSpace(d.Outcome.String() + " " + d.Reason))
	}
	// Output:
	// passed
	// rejected Ambience does not shout: remove the exclamation marks.
}
