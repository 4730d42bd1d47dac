package gates_test

import (
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// Content a later gate refuses for good will not be committed: the dedup gate forgets its
// fingerprint, so the next similar proposal (the regeneration, under another proposal id) is
// not a DUPLICATE of content nobody saw. Before, the refused content blocked it (issue 38).
func TestContentRefusedAfterDedupDoesNotMakeTheNextADuplicate(t *testing.T) {
	s := newStack(t)
	s.run(t, s.deps(testConfig()), gates.Dedup, gates.Replay)
	const text = "Rain drums on the slate roofs of the square, and gulls argue over bread."

	refused := startAt(ambience(t, "loc:square", text), gates.Dedup)
	refused.Provenance.PromptTemplate.Version = "9.9.9" // the replay gate refuses it for good
	s.publish(t, refused)
	if r := s.waitRejected(t, refused.ProposalID); r.Gate != gates.Replay || r.Transient {
		t.Fatalf("the first proposal: rejection %+v, want the replay gate's, for good", r)
	}

	again := startAt(ambience(t, "loc:square", text), gates.Dedup)
	s.publish(t, again)
	natstest.WaitFor(t, 10*time.Second, "the similar proposal passed both gates", func() bool {
		return s.proposalsOn(t, events.GateSubject(gates.Rate))[again.ProposalID] != nil
	})
	if r, ok := s.rejections(t)[again.ProposalID]; ok {
		t.Fatalf("the similar proposal was refused: %s %s %s", r.Gate, r.Code, r.Reason)
	}

	// What passed is remembered: a third similar proposal is a duplicate of the second.
	third := startAt(ambience(t, "loc:square", text), gates.Dedup)
	s.publish(t, third)
	if r := s.waitRejected(t, third.ProposalID); r.Code != events.CodeDuplicate || r.Details["duplicateOf"] != again.ProposalID {
		t.Fatalf("the third proposal: rejection %+v, want a duplicate of %s", r, again.ProposalID)
	}
}
