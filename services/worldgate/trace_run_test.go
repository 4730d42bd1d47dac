package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/attest/attesttest"
)

// A process whose gates share a key signs its run once: trace shows each hop of the run as
// signed with the run's last hop, and verifies it; a hop changed after signing is flagged.
func TestTraceVerifiesARunSignedOnce(t *testing.T) {
	keys := attesttest.NewShared()
	p := &events.Proposal{ProposalID: "move:1", Kind: events.KindPlayerMoved, SchemaVersion: events.ProposalSchemaVersion, AgentRole: "world-rules",
		CorrelationID: "c1", Actor: events.Actor{Kind: "player", ID: "player:ada"},
		Payload: []byte(`{"playerId":"player:ada","fromLocationId":"loc:a","toLocationId":"loc:b","direction":"north"}`)}
	now := time.Now().UTC()
	for _, g := range []string{"schema", "invariant", "rate", "audit"} {
		p.Route.Trail = append(p.Route.Trail, events.Hop{Gate: g, Outcome: events.OutcomePassed, At: now})
	}
	digest, err := attest.Digest(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Signers["audit"].SignRunWith(p, digest, 0); err != nil {
		t.Fatal(err)
	}
	show := func(p *events.Proposal) string {
		tp := &TraceProposal{ProposalID: p.ProposalID, Kind: p.Kind, proposal: p}
		tp.Decisions = decisionsOf(p, func(time.Time) float64 { return 0 })
		j := &Journey{CorrelationID: "c1", Proposals: []*TraceProposal{tp}}
		verifyJourney(j, keys.Ring)
		var out bytes.Buffer
		if err := printJourney(&out, j); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	out := show(p)
	if n := strings.Count(out, "(with the audit hop) ✓"); n != 3 || strings.Count(out, "✓") != 4 || strings.Contains(out, "UNSIGNED") {
		t.Errorf("want three hops signed with the audit hop and four verified:\n%s", out)
	}
	p.Route.Trail[1].Outcome = events.OutcomeApproved
	if out := show(p); strings.Count(out, "✗") != 4 {
		t.Errorf("a hop of the run changed after signing: want every hop of the run flagged:\n%s", out)
	}
}
