package events_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
)

func attestedFixture(t testing.TB) []byte {
	t.Helper()
	p := events.Proposal{ProposalID: "p-1", Kind: events.KindPlayerMoved, SchemaVersion: events.ProposalSchemaVersion,
		CorrelationID: "c-1", CausationID: "e-1", AgentRole: "world-rules", Actor: events.Actor{Kind: "player", ID: "player:ada"},
		Payload:    json.RawMessage(`{"playerId":"player:ada","fromLocationId":"loc:a","toLocationId":"loc:b","direction":"north"}`),
		Provenance: &events.Provenance{Provider: "rules", Model: "world-rules@1.0.0"},
		Route:      events.Route{Pending: []string{"schema"}}, CreatedUTC: time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC)}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// AttestedProposal (the event-processor's decoder, for proposals whose schema-gate signature
// it verifies) skips the JSON Schemas but still decodes strictly: what it accepts decodes to
// the same proposal as DecodeProposal, and unknown fields, a non-object, trailing data, an
// unknown kind and an oversized message are refused.
func TestAttestedProposalDecodesStrictly(t *testing.T) {
	raw := attestedFixture(t)
	want, err := events.DecodeProposal(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := events.Decoder{}.AttestedProposal(raw)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(want)
	b, _ := json.Marshal(got)
	if !bytes.Equal(a, b) {
		t.Fatalf("AttestedProposal decoded\n%s\nDecodeProposal\n%s", b, a)
	}
	for name, data := range map[string][]byte{
		"unknown field": bytes.Replace(raw, []byte(`{"proposalId"`), []byte(`{"extra":1,"proposalId"`), 1),
		"null":          []byte(`null`),
		"array":         []byte(`[]`),
		"trailing data": append(append([]byte{}, raw...), []byte(` {}`)...),
		"unknown kind":  bytes.Replace(raw, []byte(`"kind":"player_moved"`), []byte(`"kind":"teleport"`), 1),
		"too large":     append(append([]byte{}, raw[:len(raw)-1]...), []byte(`,"agentRole":"`+string(bytes.Repeat([]byte("x"), events.DefaultMaxBytes))+`"}`)...),
	} {
		_, err := events.Decoder{}.AttestedProposal(data)
		var inv *events.InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("%s: %v; want an *InvalidError", name, err)
		}
	}
}

// Whatever DecodeProposal accepts, AttestedProposal accepts as the same proposal; whatever it
// refuses, it refuses with an *InvalidError.
func FuzzAttestedProposal(f *testing.F) {
	f.Add(attestedFixture(f))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := events.Decoder{}.AttestedProposal(data)
		if err != nil {
			var inv *events.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("error of type %T: %v", err, err)
			}
		}
		if want, werr := events.DecodeProposal(data); werr == nil {
			if err != nil {
				t.Fatalf("DecodeProposal accepts what AttestedProposal refuses (%v): %s", err, data)
			}
			a, _ := json.Marshal(want)
			b, _ := json.Marshal(got)
			if !bytes.Equal(a, b) {
				t.Fatalf("decoded differently:\n%s\n%s", b, a)
			}
		}
	})
}

// BenchmarkDecodeProposal is what a gate process does first with every proposal it takes: the
// strict decode against the JSON Schemas (Decoder.Proposal), and the event-processor's decode
// of an attested one.
func BenchmarkDecodeProposal(b *testing.B) {
	raw := attestedFixture(b)
	b.Run("strict", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := events.DecodeProposal(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("attested", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := (events.Decoder{}).AttestedProposal(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
