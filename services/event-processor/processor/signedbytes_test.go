package processor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/provenance"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// A signature covers exactly what is committed (issue 38, item 1). An attacker who adds a
// second member of the same name — a compromised emitter before the gates, or a compromised
// gate after the others signed — gets a proposal whose digest (and every gate's reading) sees
// one value while its raw bytes hold another: the processor refuses it, and what it commits
// of an honest proposal is the canonical encoding the gates signed, not the bytes it was
// handed.
func TestDuplicateMembersAreNeverCommitted(t *testing.T) {
	e, _, _ := startProcessor(t)

	honest := proposal(events.KindLocationCreated, "honest", obj{"locationId": "loc:inn", "name": "Inn",
		"description": "A <b>warm</b> inn & its hearth.", "region": "vale"})
	forged := proposal(events.KindLocationCreated, "forged", obj{"locationId": "loc:den", "name": "Den", "description": "A quiet den."})

	// The honest proposal's bytes as handed over: signed, then re-spaced and reordered (any
	// encoding of the same content verifies).
	data, err := json.MarshalIndent(attested(honest), "", "   ")
	if err != nil {
		t.Fatal(err)
	}
	publishRaw(t, e.JS, data, "honest")
	// The forged one: the gates signed it as it was; a first "description" is slipped in
	// after they did. The digest (last value wins) is unchanged, every hop still verifies.
	data, err = json.Marshal(attested(forged))
	if err != nil {
		t.Fatal(err)
	}
	slipped := bytes.Replace(data, []byte(`"payload":{`), []byte(`"payload":{"description":"<script>abuse</script>",`), 1)
	if bytes.Equal(slipped, data) {
		t.Fatal("test data: no payload member to slip a duplicate before")
	}
	publishRaw(t, e.JS, slipped, "forged")

	natstest.WaitFor(t, 15*time.Second, "both decided", func() bool {
		return committed(t, e) == 1 && natstest.StreamMsgs(t, e.JS, events.StreamDLQ, "") == 1 && settled(t, e)
	})
	got := readAll(t, e, events.CommittedSubject("LocationCreated"))
	var evt events.DomainEvent
	if err := json.Unmarshal(got[0], &evt); err != nil {
		t.Fatal(err)
	}
	if evt.ProposalID != "honest" {
		t.Fatalf("committed %s, want only the honest proposal", evt.ProposalID)
	}
	want, err := provenance.Canonical(honest.Payload)
	if err != nil {
		t.Fatal(err)
	}
	// The event's own encoding may escape HTML (encoding/json); what it says must be, member
	// for member, the canonical encoding that was signed.
	gotCanon, err := provenance.Canonical(evt.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotCanon, want) {
		t.Fatalf("committed payload %s\nwant the canonical encoding the gates signed %s", evt.Payload, want)
	}
	dl := deadLetters(t, e)
	if len(dl) != 1 || !strings.Contains(dl[0], "named more than once") || !strings.Contains(dl[0], "/payload/description") {
		t.Fatalf("dead letters %q: want the forged proposal refused for its duplicate /payload/description", dl)
	}
}

func publishRaw(t testing.TB, js jetstream.JetStream, data []byte, msgID string) {
	t.Helper()
	if _, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: events.ValidatedSubject(events.ActorKey("", data)), Data: data}, jetstream.WithMsgID(msgID)); err != nil {
		t.Fatal(err)
	}
}

// deadLetters returns the reason header of every dead letter.
func deadLetters(t testing.TB, e *natstest.Env) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := e.JS.OrderedConsumer(ctx, events.StreamDLQ, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	n := natstest.StreamMsgs(t, e.JS, events.StreamDLQ, "")
	var out []string
	for uint64(len(out)) < n {
		m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Headers().Get(events.HeaderDLQReason))
	}
	return out
}
