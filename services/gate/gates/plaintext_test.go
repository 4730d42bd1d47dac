package gates

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
)

// The markup and disguise variants that reached players (issue 42): each is refused, by the schema
// gate where it is formatting (not URLs or markup: the safety gate names those), and by the safety
// gate in every case (a forged schema hop does not
// carry them past safety).
//
// PlainTextViolations is exported for the safety gate's test (package gates_test).
var PlainTextViolations = []struct {
	Name, Text string
	Schema     bool // refused by the schema gate too
}{
	{"markdown image", "Rain on the roofs. ![map](https://evil.example/x.png)", true},
	{"markdown link", "Ask the smith about [the sale](javascript:alert(1)) today.", true},
	{"markdown link to a page", "Read [the notice](evil.example/notice) by the well.", true},
	{"URL", "The crier shouts: visit https://evil.example/free-gold now!", false},
	{"www address", "The crier shouts: visit www.evil-example.com for gold!", false},
	{"zero-width characters", "The bell\u200b tolls\u200d at dusk.", true},
	{"bidi override", "The sign reads \u202egnp.exe\u202c by the door.", true},
	{"control character", "The bell\x1b[31m tolls.", true},
	{"fullwidth script tag", "Lanterns sway. ＜script＞alert(1)＜／script＞", false},
	{"fullwidth template", "Lanterns sway. ｛｛7*7｝｝", false},
}

func TestSchemaGateRefusesFormatting(t *testing.T) {
	r := route.Default()
	g := &schema{routes: &r}
	check := func(text string) Decision {
		p, _ := benchProposal(t)
		payload, _ := json.Marshal(map[string]any{"locationId": "loc:square", "text": text, "mood": "calm"})
		p.Payload = payload
		ctx := context.WithValue(t.Context(), subjectKey{}, events.EmitSubject(p.AgentRole))
		d, err := g.Check(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, c := range PlainTextViolations {
		d := check(c.Text)
		if c.Schema && (d.Outcome != Rejected || d.Code != events.CodeSchemaInvalid || !strings.Contains(d.Reason, "plain text")) {
			t.Errorf("%s: %v %s %q, want the schema gate refusing it as not plain text", c.Name, d.Outcome, d.Code, d.Reason)
		}
	}
	for _, text := range []string{
		"The smith hammers; sparks fly, 3 < 4 of them land.", "A sign reads: [closed] (back at noon).",
		"Bram says: \"Halt! Who goes there?\"\nThe gate creaks.", "The tavern.example of hospitality, they say.",
		"Café crème, two coppers.", "The {cracked} bell tolls at dusk.",
	} {
		if d := check(text); d.Outcome != Passed {
			t.Errorf("%q: %v %q, want passed", text, d.Outcome, d.Reason)
		}
	}
}
