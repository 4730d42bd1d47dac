package gates_test

import (
	"slices"
	"testing"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/gates"
)

// The markup and disguise variants (gates.PlainTextViolations) never pass the safety gate, which
// a forged schema hop cannot skip.
func TestSafetyGateRefusesFormattingAndDisguisedMarkup(t *testing.T) {
	s := newStack(t)
	s.run(t, s.deps(testConfig()), "safety")
	var bad []*events.Proposal
	for _, c := range gates.PlainTextViolations {
		p := startAt(ambience(t, "loc:square", c.Text), "safety")
		bad = append(bad, p)
		s.publish(t, p)
	}
	for i, p := range bad {
		r := s.waitRejected(t, p.ProposalID)
		cats := toStrings(r.Details["categories"])
		if r.Code != events.CodeSafetyFlagged || !(slices.Contains(cats, "markup_injection") || slices.Contains(cats, gates.CategoryMarkup)) {
			t.Errorf("%s: rejection %+v", gates.PlainTextViolations[i].Name, r)
		}
	}
}
