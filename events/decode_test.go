package events

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/schemas"
)

const validEnvelope = `{
  "specVersion": "1.0",
  "eventId": "01936f2e-7c4a-7b3e-9f1d-2a6b8c4d5e6f",
  "type": "Player.SpokeToNPC",
  "occurredUtc": "2026-11-22T10:00:00Z",
  "source": "game-backend/eu-1",
  "actor": {"kind": "player", "id": "player:ada"},
  "correlationId": "c-1",
  "idempotencyKey": "k-1",
  "payload": {"playerId": "player:ada", "npcId": "npc:brannoc", "locationId": "loc:tavern", "utterance": "Any news?"}
}`

// edit returns validEnvelope with the change applied to its decoded form.
func edit(t *testing.T, change func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(validEnvelope), &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func payload(m map[string]any) map[string]any { return m["payload"].(map[string]any) }

func TestDecodeEnvelopeValid(t *testing.T) {
	env, err := DecodeEnvelope([]byte(validEnvelope))
	if err != nil {
		t.Fatalf("valid envelope rejected: %v", err)
	}
	if env.Type != PlayerSpokeToNPC || env.Actor.ID != "player:ada" || env.IdempotencyKey != "k-1" {
		t.Fatalf("decoded wrong: %+v", env)
	}
}

func TestDecodeEnvelopeProblems(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		code ProblemCode
		path string
		says string
	}{
		{"too large", []byte(`{"pad":"` + strings.Repeat("x", DefaultMaxBytes) + `"}`), ProblemTooLarge, "", "limit"},
		{"not json", []byte(`{"specVersion": "1.0",`), ProblemMalformed, "", "not valid JSON"},
		{"array", []byte(`[1,2]`), ProblemMalformed, "", "JSON object"},
		{"unknown top-level field", edit(t, func(m map[string]any) { m["nickname"] = "x" }), ProblemUnknownField, "/nickname", "remove it"},
		{"unknown actor field", edit(t, func(m map[string]any) { m["actor"].(map[string]any)["age"] = 3 }), ProblemUnknownField, "/actor/age", "unknown field"},
		{"missing required", edit(t, func(m map[string]any) { delete(m, "correlationId") }), ProblemMissingField, "/correlationId", "missing"},
		{"malformed time", edit(t, func(m map[string]any) { m["occurredUtc"] = "yesterday" }), ProblemInvalidField, "/occurredUtc", "date-time"},
		{"malformed uuid", edit(t, func(m map[string]any) { m["eventId"] = "abc" }), ProblemInvalidField, "/eventId", "uuid"},
		{"uuid v4 not v7", edit(t, func(m map[string]any) { m["eventId"] = "9b2f3c4e-1a2b-4c3d-8e4f-5a6b7c8d9e0f" }), ProblemInvalidField, "/eventId", "UUIDv7"},
		{"wrong spec version", edit(t, func(m map[string]any) { m["specVersion"] = "2.0" }), ProblemSpecVersion, "/specVersion", `set it to "1.0"`},
		{"unknown type", edit(t, func(m map[string]any) { m["type"] = "Player.Danced" }), ProblemUnknownType, "/type", "Player.Moved"},
		{"payload unknown field", edit(t, func(m map[string]any) { payload(m)["mood"] = "x" }), ProblemInvalidPayload, "/payload/mood", "unknown field"},
		{"payload missing field", edit(t, func(m map[string]any) { delete(payload(m), "npcId") }), ProblemInvalidPayload, "/payload/npcId", "missing"},
		{"payload bad id", edit(t, func(m map[string]any) { payload(m)["npcId"] = "brannoc" }), ProblemInvalidPayload, "/payload/npcId", "pattern"},
		{"payload too long", edit(t, func(m map[string]any) { payload(m)["utterance"] = strings.Repeat("a", 501) }), ProblemInvalidPayload, "/payload/utterance", "500"},
		{"move to same place", edit(t, func(m map[string]any) {
			m["type"] = PlayerMoved
			m["payload"] = map[string]any{"playerId": "player:ada", "fromLocationId": "loc:a", "toLocationId": "loc:a"}
		}), ProblemInvalidPayload, "/payload/toLocationId", "differ"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEnvelope(tc.data)
			if err == nil {
				t.Fatal("accepted bad input")
			}
			inv, ok := err.(*InvalidError)
			if !ok {
				t.Fatalf("error is %T, want *InvalidError: %v", err, err)
			}
			for _, p := range inv.Problems {
				if p.Code == tc.code && p.Path == tc.path && strings.Contains(p.Message, tc.says) {
					return
				}
			}
			t.Fatalf("want problem %s at %q saying %q; got %v", tc.code, tc.path, tc.says, err)
		})
	}
}

func TestDecoderMaxBytesConfigurable(t *testing.T) {
	if _, err := (Decoder{MaxBytes: 100}).Envelope([]byte(validEnvelope)); !Has(err, ProblemTooLarge) {
		t.Fatalf("want too_large with a 100-byte limit, got %v", err)
	}
	if _, err := (Decoder{MaxBytes: 1 << 20}).Envelope([]byte(validEnvelope)); err != nil {
		t.Fatal(err)
	}
}

func TestNewEnvelopeRoundTrips(t *testing.T) {
	env, err := NewEnvelope(PlayerMoved, "test", Actor{Kind: "player", ID: "player:ada"},
		PlayerMovedPayload{PlayerID: "player:ada", FromLocationID: "loc:a", ToLocationID: "loc:b", Direction: "north"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(env)
	got, err := DecodeEnvelope(data)
	if err != nil {
		t.Fatalf("NewEnvelope built an invalid envelope: %v", err)
	}
	if got.EventID != env.EventID || Subject(got.Type) != "world.events.player.moved" {
		t.Fatalf("round trip changed it: %+v", got)
	}
}

// Every schema file has a type or kind that uses it, and every type and kind has a schema.
func TestSchemasCoverContract(t *testing.T) {
	used := map[string]bool{}
	for _, typ := range EventTypes() {
		used[schemas.EventPayload(typ)] = true
	}
	for _, k := range Kinds() {
		used[schemas.ProposalPayload(k.Kind)] = true
	}
	for p := range used {
		if _, err := fs.Stat(schemas.FS(), p); err != nil {
			t.Errorf("no schema file for %s", p)
		}
	}
	for _, dir := range []string{"v1/events", "v1/proposals"} {
		entries, _ := fs.ReadDir(schemas.FS(), dir)
		for _, e := range entries {
			if !used[dir+"/"+e.Name()] {
				t.Errorf("schema %s/%s is used by no event type or proposal kind", dir, e.Name())
			}
		}
	}
}

func BenchmarkDecodeEnvelope(b *testing.B) {
	data := []byte(validEnvelope)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodeEnvelope(data); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add([]byte(validEnvelope))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := DecodeEnvelope(data)
		if err != nil {
			if _, ok := err.(*InvalidError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		// Whatever is accepted must survive a re-encode and decode unchanged in meaning.
		again, _ := json.Marshal(env)
		if _, err := DecodeEnvelope(again); err != nil {
			t.Fatalf("accepted envelope fails after re-encoding: %v\n%s", err, again)
		}
	})
}

// A player's event must name that player as its actor: rotating the actor id cannot make one
// player look like many.
func TestPlayerEventActorMustBeItsPlayer(t *testing.T) {
	env, err := NewEnvelope(PlayerSpokeToNPC, "test", Actor{Kind: "player", ID: "player:mallory-7"},
		PlayerSpokeToNPCPayload{PlayerID: "player:mallory", NPCID: "npc:bram", LocationID: "loc:square", Utterance: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(env)
	_, err = DecodeEnvelope(raw)
	if err == nil || !strings.Contains(err.Error(), "/actor/id") || !strings.Contains(err.Error(), "player:mallory") {
		t.Fatalf("actor ≠ player accepted or unclear: %v", err)
	}
	env.Actor.ID = "player:mallory"
	raw, _ = json.Marshal(env)
	if _, err := DecodeEnvelope(raw); err != nil {
		t.Fatalf("matching actor refused: %v", err)
	}
	if got := PlayerOf(env); got != "player:mallory" {
		t.Fatalf("PlayerOf = %q", got)
	}
	// A system actor may act for a player (a backend job); the player named still counts.
	env.Actor = Actor{Kind: "system", ID: "scheduler-3"}
	raw, _ = json.Marshal(env)
	if _, err := DecodeEnvelope(raw); err != nil {
		t.Fatalf("system actor refused: %v", err)
	}
}
