package gates_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/slip"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// passDedup sends a new ambience proposal of text for loc through the dedup gate and waits
// until it has passed (it is on the replay gate's subject).
func (s *stack) passDedup(t *testing.T, loc, text string) *events.Proposal {
	t.Helper()
	p := startAt(ambience(t, loc, text), gates.Dedup)
	s.publish(t, p)
	s.waitOn(t, events.GateSubject(gates.Replay), p.ProposalID)
	return p
}

// waitOn waits until proposal id is on subject. Like waitRejected, it reads the subject again
// only when it holds more messages (each read takes a consumer of its own).
func (s *stack) waitOn(t *testing.T, subject, id string) {
	t.Helper()
	seen, found := -1, false
	natstest.WaitFor(t, 10*time.Second, "proposal "+id+" on "+subject, func() bool {
		if n := s.count(t, events.StreamProposals, subject); n != seen {
			seen, found = n, s.proposalsOn(t, subject)[id] != nil
		}
		return found
	})
}

// refuse publishes on proposals.rejected.<on> the rejection of p that the gate named in the
// body (by) makes, as slip (gates) and the event-processor build it.
func (s *stack) refuse(t *testing.T, on, by string, p *events.Proposal, v slip.Verdict) {
	t.Helper()
	m, err := slip.Rejected(slip.Rejection(p, by, v, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	s.publishRaw(t, events.RejectedSubject(on), m.ID+":"+on, m.Data)
}

// rejectionsRead waits until the dedup gate's consumer of rejections has settled every
// rejection in the stream.
func (s *stack) rejectionsRead(t *testing.T) {
	t.Helper()
	c, err := s.nats.JS.Consumer(context.Background(), events.StreamProposals, gates.DedupRejectionsDurable)
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 10*time.Second, "the dedup gate read every rejection", func() bool {
		info, err := c.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}

// The dedup gate and the gate that refuses after it run in separate processes (the production
// layout, gates.OneProcessPerGate), or the event-processor refuses at commit: the dedup gate
// learns of the refusal from the rejection stream and forgets the refused content, so its
// regeneration passes. Before, the fingerprint blocked similar content as DUPLICATE for the
// whole dedup window (issue 38).
func TestContentRefusedAfterDedupElsewhereDoesNotMakeTheNextADuplicate(t *testing.T) {
	s := newStack(t)
	s.run(t, s.deps(testConfig()), gates.Dedup)  // one process
	s.run(t, s.deps(testConfig()), gates.Replay) // another

	t.Run("by the replay gate in another process", func(t *testing.T) {
		const text = "Rain drums on the slate roofs of the square, and gulls argue over bread."
		refused := startAt(ambience(t, "loc:square", text), gates.Dedup)
		refused.Provenance.PromptTemplate.Version = "9.9.9" // the replay gate refuses it for good
		s.publish(t, refused)
		if r := s.waitRejected(t, refused.ProposalID); r.Gate != gates.Replay || r.Transient {
			t.Fatalf("the first proposal: rejection %+v, want the replay gate's, for good", r)
		}
		s.rejectionsRead(t)

		again := startAt(ambience(t, "loc:square", text), gates.Dedup)
		s.publish(t, again)
		s.waitOn(t, events.GateSubject(gates.Rate), again.ProposalID) // passed both gates
		third := startAt(ambience(t, "loc:square", text), gates.Dedup)
		s.publish(t, third)
		if r := s.waitRejected(t, third.ProposalID); r.Code != events.CodeDuplicate || r.Details["duplicateOf"] != again.ProposalID {
			t.Fatalf("the third proposal: rejection %+v, want a duplicate of %s, which passed", r, again.ProposalID)
		}
	})

	t.Run("by the event-processor at commit", func(t *testing.T) {
		const text = "A bell tolls twice from the market tower as merchants pack their carts."
		first := s.passDedup(t, "loc:market", text)
		s.refuse(t, processor.Gate, processor.Gate, first, slip.Verdict{Code: events.CodeCommitConflict, Reason: "The location was removed before the text committed."})
		s.rejectionsRead(t)

		again := s.passDedup(t, "loc:market", text)
		if r, ok := s.rejections(t)[again.ProposalID]; ok {
			t.Fatalf("the regenerated proposal was refused: %s %s %s", r.Gate, r.Code, r.Reason)
		}
	})
}

// Only a final refusal after the dedup gate, believed, forgets: a transient one brings the same
// proposal back (it may yet commit), a gate before dedup never saw it, and a rejection that is
// not what its subject says (another gate's name, another proposal, a member named twice)
// forgets nothing and is dead-lettered with the reason.
func TestDedupForgetsOnlyWhatWasRefusedForGoodAfterIt(t *testing.T) {
	s := newStack(t)
	s.run(t, s.deps(testConfig()), gates.Dedup)
	final := slip.Verdict{Code: events.CodeCommitConflict, Reason: "Refused at commit."}
	forged := func(t *testing.T, p *events.Proposal, mutate func(string) string) {
		m, err := slip.Rejected(slip.Rejection(p, processor.Gate, final, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		s.publishRaw(t, events.RejectedSubject(processor.Gate), m.ID+":forged", []byte(mutate(string(m.Data))))
	}
	cases := []struct {
		name       string
		deadLetter string // a part of the dead letter's reason; "" for none
		refuse     func(t *testing.T, p *events.Proposal)
	}{
		{"a transient refusal by the rate gate", "", func(t *testing.T, p *events.Proposal) {
			s.refuse(t, gates.Rate, gates.Rate, p, slip.Verdict{Code: events.CodeRateLimited, Reason: "Too many.", Transient: true, RetryAfter: 5})
		}},
		{"a transient refusal by the audit gate", "", func(t *testing.T, p *events.Proposal) {
			s.refuse(t, gates.Audit, gates.Audit, p, slip.Verdict{Code: events.CodeAuditUnavailable, Reason: "No audit.", Transient: true, RetryAfter: 30})
		}},
		{"a final refusal by a gate before dedup", "", func(t *testing.T, p *events.Proposal) {
			s.refuse(t, gates.Safety, gates.Safety, p, slip.Verdict{Code: events.CodeSafetyFlagged, Reason: "Flagged."})
		}},
		{"the event-processor's refusal on the rate gate's subject", `names the "processor" gate`, func(t *testing.T, p *events.Proposal) {
			s.refuse(t, gates.Rate, processor.Gate, p, final)
		}},
		{"the replay gate's refusal on the rate gate's subject", `names the "replay" gate`, func(t *testing.T, p *events.Proposal) {
			s.refuse(t, gates.Rate, gates.Replay, p, slip.Verdict{Code: events.CodeReplayIncomplete, Reason: "Cannot replay."})
		}},
		{"a refusal naming another proposal than it carries", "but carries", func(t *testing.T, p *events.Proposal) {
			forged(t, p, func(data string) string {
				return strings.Replace(data, `"proposalId":"`+p.ProposalID+`"`, `"proposalId":"someone-else"`, 1)
			})
		}},
		{"a refusal naming its transience twice", "named more than once", func(t *testing.T, p *events.Proposal) {
			forged(t, p, func(data string) string {
				return strings.Replace(data, `"transient":false`, `"transient":true,"transient":false`, 1)
			})
		}},
	}
	locations := []string{"loc:square", "loc:market", "loc:gate", "loc:tower", "loc:harbour", "loc:mill", "loc:well"}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const text = "Fog rolls in from the river and lanterns glow like drowned moons along the quay."
			first := s.passDedup(t, locations[i], text)
			before := len(s.messages(t, events.StreamDLQ, events.DeadLetterSubject(gates.DedupRejectionsDurable)))
			c.refuse(t, first)
			s.rejectionsRead(t)

			next := startAt(ambience(t, locations[i], text), gates.Dedup)
			s.publish(t, next)
			if r := s.waitRejected(t, next.ProposalID); r.Code != events.CodeDuplicate || r.Details["duplicateOf"] != first.ProposalID {
				t.Fatalf("the similar proposal: rejection %+v, want a duplicate of %s, still remembered", r, first.ProposalID)
			}
			dls := s.messages(t, events.StreamDLQ, events.DeadLetterSubject(gates.DedupRejectionsDurable))
			switch {
			case c.deadLetter == "" && len(dls) != before:
				t.Fatalf("%d dead letters, want %d", len(dls), before)
			case c.deadLetter != "" && len(dls) != before+1:
				t.Fatalf("%d dead letters, want %d (the untrusted rejection)", len(dls), before+1)
			case c.deadLetter != "":
				if reason := dls[len(dls)-1].Headers().Get(events.HeaderDLQReason); !strings.Contains(reason, c.deadLetter) {
					t.Fatalf("dead letter reason %q, want it to say %q", reason, c.deadLetter)
				}
			}
		})
	}
}
