package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Every decoder on a trust boundary refuses a message two readers could read differently
// (issue 38, item 1): the same member twice, at any depth, or text that is not UTF-8.
func TestDecodersRefuseWhatReadersReadDifferently(t *testing.T) {
	env := []byte(`{"specVersion":"1.0","eventId":"0190f5a4-5c1e-7b3a-9c1d-2e3f4a5b6c7d","type":"Player.SpokeToNPC",` +
		`"occurredUtc":"2026-11-27T10:00:00Z","source":"game://test","actor":{"kind":"player","id":"player:ada"},` +
		`"correlationId":"c-1","idempotencyKey":"k-1",` +
		`"payload":{"playerId":"player:ada","npcId":"npc:oren","locationId":"loc:tavern","utterance":"hello"}}`)
	if _, err := DecodeEnvelope(env); err != nil {
		t.Fatalf("the honest envelope is refused: %v", err)
	}
	prop, err := json.Marshal(sampleProposal())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (Decoder{}).AttestedProposal(prop); err != nil {
		t.Fatalf("the honest proposal is refused: %v", err)
	}
	slip := func(doc []byte, after, member string) []byte {
		out := bytes.Replace(doc, []byte(after), []byte(after+member+","), 1)
		if bytes.Equal(out, doc) {
			t.Fatalf("test data: %s not found", after)
		}
		return out
	}
	for _, c := range []struct {
		name   string
		decode func([]byte) error
		data   []byte
		code   ProblemCode
		path   string
	}{
		{"envelope payload", func(b []byte) error { _, err := DecodeEnvelope(b); return err },
			slip(env, `"payload":{`, `"utterance":"<script>x</script>"`), ProblemDuplicateKey, "/payload/utterance"},
		{"envelope top level", func(b []byte) error { _, err := DecodeEnvelope(b); return err },
			slip(env, `{`, `"type":"Quest.SeedRequested"`), ProblemDuplicateKey, "/type"},
		{"envelope actor", func(b []byte) error { _, err := DecodeEnvelope(b); return err },
			slip(env, `"actor":{`, `"id":"player:bob"`), ProblemDuplicateKey, "/actor/id"},
		{"envelope invalid UTF-8", func(b []byte) error { _, err := DecodeEnvelope(b); return err },
			bytes.Replace(env, []byte("hello"), []byte("hel\xfflo"), 1), ProblemMalformed, "/payload/utterance"},
		{"proposal payload", func(b []byte) error { _, err := DecodeProposal(b); return err },
			slip(prop, `"payload":{`, `"line":"abuse"`), ProblemDuplicateKey, "/payload/line"},
		{"attested proposal payload", func(b []byte) error { _, err := (Decoder{}).AttestedProposal(b); return err },
			slip(prop, `"payload":{`, `"line":"abuse"`), ProblemDuplicateKey, "/payload/line"},
		{"attested proposal provenance", func(b []byte) error { _, err := (Decoder{}).AttestedProposal(b); return err },
			slip(prop, `"provenance":{`, `"model":"other"`), ProblemDuplicateKey, "/provenance/model"},
	} {
		err := c.decode(c.data)
		var inv *InvalidError
		if !errors.As(err, &inv) || len(inv.Problems) != 1 || inv.Problems[0].Code != c.code || inv.Problems[0].Path != c.path {
			t.Errorf("%s: %v, want one %s problem at %s", c.name, err, c.code, c.path)
		}
	}
	// A payload decoded on its own (the event-processor's apply, the gates' readers).
	if _, err := DecodePayload(KindNPCDialogue, []byte(`{"npcId":"npc:oren","playerId":"player:ada","locationId":"loc:t","line":"a","line":"b","intent":"greet"}`)); err == nil ||
		!strings.Contains(err.Error(), "named more than once") {
		t.Errorf("DecodePayload with a duplicate line: %v", err)
	}
	if err := CheckJSON("body", []byte(`{"a":1} {"a":2}`)); err == nil {
		t.Error("two values passed CheckJSON")
	}
	if err := CheckJSON("body", []byte(`{"a":{"b":1},"c":{"b":2}}`)); err != nil {
		t.Errorf("the same name in two objects is not a duplicate: %v", err)
	}
}

// A reader believes an outcome only on the subject its body belongs on (issue 38, item 2):
// the ai-worker may publish refusals, and a body it writes claiming a commit is refused.
func TestOutcomesAreBelievedOnlyOnTheirOwnSubject(t *testing.T) {
	p := sampleProposal()
	evt := DomainEvent{EventID: DomainEventID(p.ProposalID, 0), Type: "NPCDialogueAccepted", ProposalID: p.ProposalID,
		CorrelationID: "c-1", OccurredUTC: time.Now().UTC(), CommittedUTC: time.Now().UTC(), Payload: p.Payload}
	committed := CommittedOutcome(p, evt)
	if err := CheckOutcomeSubject(committed.Subject(), committed); err != nil {
		t.Fatalf("a genuine commit is refused: %v", err)
	}
	var mis *MisroutedError
	if err := CheckOutcomeSubject(OutcomeSubject(OutcomeRefused, "player:ada"), committed); !errors.As(err, &mis) {
		t.Errorf("a commit on the refusals' subject: %v", err)
	}
	if err := CheckOutcomeSubject(OutcomeSubject(OutcomeCommitted, "player:bob"), committed); !errors.As(err, &mis) {
		t.Errorf("ada's commit on bob's subject: %v", err)
	}
	rej := &Rejection{Gate: "safety", Code: CodeSafetyFlagged, Reason: "threat"}
	refused := RefusedOutcome(p, rej, rej.Code, rej.Reason, time.Now())
	if err := CheckOutcomeSubject(refused.Subject(), refused); err != nil {
		t.Fatalf("a genuine refusal is refused: %v", err)
	}
	refused.Event = &evt // a refusal smuggling content
	if err := CheckOutcomeSubject(refused.Subject(), refused); !errors.As(err, &mis) {
		t.Errorf("a refusal carrying an event: %v", err)
	}
	if _, err := refused.Encode(); err == nil {
		t.Error("the outcome schema accepts a refusal carrying an event")
	}
}
