package aiworker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// An event the ai-worker refuses to act on (Nats-Msg-Id not its idempotency key, a clock far
// ahead, an actor impersonating another player) is dead-lettered AND answered: a refused
// Outcome with code EVENT_REFUSED and the reason, addressed to the actor the envelope claims
// (never to the player it impersonates), so a game awaiting it does not wait for its deadline.
func TestRefusedEventsAreAnswered(t *testing.T) {
	s := startStack(t, stackOpts{})
	ctx := context.Background()
	ada := events.Actor{Kind: "player", ID: "player:ada"}
	mk := func(payload events.PlayerSpokeToNPCPayload, at time.Time) *events.Envelope {
		env, err := events.NewEnvelope(events.PlayerSpokeToNPC, "test", ada, payload)
		if err != nil {
			t.Fatal(err)
		}
		env.OccurredUTC = at.UTC().Truncate(time.Millisecond)
		return env
	}
	send := func(env *events.Envelope, msgID string) {
		t.Helper()
		raw, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(events.Subject(env.Type))
		m.Data = raw
		m.Header.Set(events.HeaderMsgID, msgID)
		if _, err := s.nats.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	wrongID := mk(spoke, time.Now())
	send(wrongID, "not-"+wrongID.IdempotencyKey)
	future := mk(spoke, time.Now().Add(2*time.Hour))
	send(future, future.IdempotencyKey)
	bob := spoke
	bob.PlayerID = "player:bob"
	spoof := mk(bob, time.Now())
	send(spoof, spoof.IdempotencyKey)

	// A Player.Moved on the npc-dialogue role's subject: that role cannot read it (it failed
	// on every delivery and was dead-lettered unanswered).
	moved, err := events.NewEnvelope(events.PlayerMoved, "test", ada, events.PlayerMovedPayload{PlayerID: ada.ID, FromLocationID: "loc:square", ToLocationID: "loc:gate", Direction: "north"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(moved)
	misrouted := nats.NewMsg(events.Subject(events.PlayerSpokeToNPC))
	misrouted.Data = raw
	misrouted.Header.Set(events.HeaderMsgID, moved.IdempotencyKey)
	if _, err := s.nats.JS.PublishMsg(ctx, misrouted); err != nil {
		t.Fatal(err)
	}

	want := map[string]string{wrongID.EventID: "Nats-Msg-Id", future.EventID: "in the future", spoof.EventID: "player:bob",
		moved.EventID: "the subject of Player.SpokeToNPC events"}
	got := map[string]*events.Outcome{}
	natstest.WaitFor(t, 20*time.Second, "a refused outcome for each refused event", func() bool {
		st, err := s.nats.JS.Stream(ctx, events.StreamOutcomes)
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		if err != nil {
			return false
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue
			}
			o, err := events.DecodeOutcome(m.Data)
			if err != nil {
				t.Fatalf("invalid outcome on %s: %v", m.Subject, err)
			}
			if m.Subject != events.OutcomeSubject(events.OutcomeRefused, ada.ID) {
				t.Fatalf("outcome of %s published on %s, want the claimed actor's subject", o.EventID, m.Subject)
			}
			got[o.EventID] = o
		}
		return len(got) >= len(want)
	})
	for id, frag := range want {
		o := got[id]
		if o == nil || o.Kind != events.OutcomeRefused || o.Refusal == nil || o.Refusal.Code != events.CodeEventRefused ||
			!strings.Contains(o.Refusal.Reason, frag) || o.Actor != ada {
			t.Errorf("event %s: outcome %+v; want refused EVENT_REFUSED naming %q, actor %s", id, o, frag, ada.ID)
		}
	}
	// And each is still dead-lettered with its reason.
	natstest.WaitFor(t, 10*time.Second, "four dead letters", func() bool {
		st, err := s.nats.JS.Stream(ctx, events.StreamDLQ)
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs >= 4
	})
	// Nothing was proposed for them.
	if ps := s.proposals(schemaSubject); len(ps) != 0 {
		t.Fatalf("%d proposals for refused events", len(ps))
	}
}
