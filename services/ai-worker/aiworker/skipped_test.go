package aiworker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
)

// outcomesOf reads every outcome stored for eventID.
func (s *stack) outcomesOf(eventID string) []*events.Outcome {
	s.t.Helper()
	ctx := context.Background()
	st, err := s.nats.JS.Stream(ctx, events.StreamOutcomes)
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []*events.Outcome
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		o, err := events.DecodeOutcome(m.Data)
		if err != nil {
			s.t.Fatalf("invalid outcome on %s: %v", m.Subject, err)
		}
		if err := events.CheckOutcomeSubject(m.Subject, o); err != nil {
			s.t.Fatal(err)
		}
		if o.EventID == eventID {
			out = append(out, o)
		}
	}
	return out
}

// A Player.Moved into a place whose ambience is still fresh is not acted on, and says so
// (issue 40 item 3): one skipped outcome, with the reason and when the place may get new
// ambience, and no proposal.
func TestFreshAmbienceIsASkippedOutcome(t *testing.T) {
	s := startStack(t, stackOpts{})
	ctx := context.Background()
	// Ambience committed for the tavern a minute ago (as the event-processor would).
	payload, _ := json.Marshal(map[string]any{"locationId": "loc:tavern", "text": "Smoke curls from the hearth."})
	committed := time.Now().Add(-time.Minute).UTC()
	evt, _ := json.Marshal(events.DomainEvent{EventID: "11111111-1111-5111-8111-111111111111", Type: "AmbienceGenerated", ProposalID: "p-earlier",
		CorrelationID: "c-earlier", OccurredUTC: committed, CommittedUTC: committed, Payload: payload})
	if _, err := s.nats.JS.Publish(ctx, events.CommittedSubject("AmbienceGenerated"), evt); err != nil {
		t.Fatal(err)
	}
	env := s.publish(events.PlayerMoved, events.PlayerMovedPayload{PlayerID: "player:ada", FromLocationID: "loc:square", ToLocationID: "loc:tavern", Direction: "east"})
	var got []*events.Outcome
	natstest.WaitFor(t, 15*time.Second, "the skipped outcome of the move into the tavern", func() bool {
		got = s.outcomesOf(env.EventID)
		return len(got) > 0
	})
	o := got[0]
	if len(got) != 1 || o.Kind != events.OutcomeSkipped || o.Skip == nil || o.Skip.Code != events.CodeAmbienceFresh ||
		!strings.Contains(o.Skip.Reason, "loc:tavern has ambience committed") || o.AgentRole != "ambience" || o.LocationID != "loc:tavern" {
		t.Fatalf("outcomes %+v; want one skipped AMBIENCE_FRESH from ambience", got)
	}
	// Fresh for 10 minutes by default, committed a minute ago: about nine left.
	if ra := o.Skip.RetryAfter; ra < 8*60 || ra > 9*60+1 || o.Skip.RetryAtUTC == nil {
		t.Errorf("retryAfter %.0fs (at %v), want about 540", ra, o.Skip.RetryAtUTC)
	}
	if ps := s.proposals(schemaSubject); len(ps) != 0 {
		t.Fatalf("%d proposals for a skipped move", len(ps))
	}
	// Decided once: the trigger is acknowledged and nothing more is published for it (a
	// redelivery is the same outcome id, which the stream stores once).
	natstest.WaitFor(t, 10*time.Second, "the trigger acknowledged", s.settled(events.StreamWorld, "ai-ambience"))
	if n := len(s.outcomesOf(env.EventID)); n != 1 {
		t.Fatalf("%d outcomes, want 1", n)
	}
}

// A trigger the role cannot act on within its deliveries (the world server is down, so a move
// cannot be resolved) is dead-lettered on its last delivery AND answered: a refused outcome
// GAVE_UP, transient, so the game does not wait for ever (issue 40 item 3). Earlier
// deliveries are handed back for a retry, unanswered.
func TestATriggerGivenUpOnIsAnswered(t *testing.T) {
	s := startStack(t, stackOpts{noApp: true})
	s.world.Close() // list-exits cannot be answered
	env, err := events.NewEnvelope(events.PlayerMoveRequested, "test", events.Actor{Kind: "player", ID: "player:ada"},
		events.PlayerMoveRequestedPayload{PlayerID: "player:ada", FromLocationID: "loc:square", Direction: "north"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(env)
	role, _ := roles.Lookup(roles.WorldRules)
	handle := s.worker.TriggerHandler(role)
	deliver := func(n int) error {
		m := runtime.NewMessage(events.Subject(env.Type), env.IdempotencyKey, raw)
		m.Metadata.Set(runtime.MetaDeliveries, strconv.Itoa(n))
		m.Metadata.Set(runtime.MetaMaxDeliver, "5")
		m.SetContext(context.Background())
		_, err := handle(m)
		return err
	}
	if err := deliver(1); err == nil || runtime.IsPermanent(err) {
		t.Fatalf("first delivery: %v; want an error that hands it back for a retry", err)
	}
	err = deliver(5)
	var pe *runtime.PermanentError
	if !errors.As(err, &pe) || len(pe.Also) != 1 {
		t.Fatalf("last delivery: %v; want a dead letter with one outcome", err)
	}
	o, derr := events.DecodeOutcome(pe.Also[0].Payload)
	if derr != nil || o.Kind != events.OutcomeRefused || o.Refusal.Code != events.CodeGaveUp || !o.Refusal.Transient ||
		o.EventID != env.EventID || o.AgentRole != roles.WorldRules || !strings.Contains(o.Refusal.Reason, "after 5 attempts") {
		t.Fatalf("outcome %+v (%v); want refused GAVE_UP, transient, for the move", o, derr)
	}
	if subj := pe.Also[0].Metadata.Get(runtime.MetaSubject); subj != o.Subject() || events.CheckOutcomeSubject(subj, o) != nil {
		t.Fatalf("outcome published on %q", subj)
	}
}
