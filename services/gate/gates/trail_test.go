package gates_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// A new proposal arrives on its emitter's subject with an empty trail: the gates write it as
// they decide. The schema gate passed one whose emitter had written hops into it (issue 38);
// it now refuses it with SCHEMA_INVALID and a sentence naming /route/trail.
func TestSchemaGateRefusesANewProposalWithATrail(t *testing.T) {
	s := newStack(t)
	s.run(t, s.deps(testConfig()), gates.Schema)

	prefilled := ambience(t, "loc:square", "Gulls wheel over the harbour wall.")
	prefilled.Route.Trail = []events.Hop{{Gate: gates.Safety, Outcome: events.OutcomePassed, At: time.Now().UTC()}}
	s.publish(t, prefilled)
	clean := ambience(t, "loc:square", "Lanterns sway above the square.")
	s.publish(t, clean)

	r := s.waitRejected(t, prefilled.ProposalID)
	if r.Gate != gates.Schema || r.Code != events.CodeSchemaInvalid || !strings.Contains(r.Reason, "must be empty on a new proposal") ||
		!slices.Contains(toStrings(r.Details["paths"]), "/route/trail") {
		t.Fatalf("rejection of the proposal with a trail: %s %s %s %v", r.Gate, r.Code, r.Reason, r.Details)
	}
	natstest.WaitFor(t, 10*time.Second, "the clean proposal passed", func() bool {
		return s.proposalsOn(t, events.GateSubject(gates.Safety))[clean.ProposalID] != nil
	})
	if _, passed := s.proposalsOn(t, events.GateSubject(gates.Safety))[prefilled.ProposalID]; passed {
		t.Fatal("the proposal with a trail was forwarded")
	}
}
