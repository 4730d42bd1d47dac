package attest_test

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/provenance"
	"github.com/worldgate/worldgate/shared/attest"
)

var aiRoute = []string{"schema", "safety", "invariant", "dedup", "replay", "rate", "audit"}

// realistic is an ambience proposal as the ai-worker builds it: payload, provenance with two
// recorded tool results.
func realistic(t testing.TB) *events.Proposal {
	t.Helper()
	res1 := json.RawMessage(`{"locationId":"loc:market-square","name":"Market Square","description":"Stalls of dyed cloth and copper pans crowd the square; a fountain of three herons stands in the middle.","exits":[{"direction":"north","to":"loc:ash-gate"},{"direction":"east","to":"loc:tannery-row"}],"npcs":["npc:brannoc","npc:ilse"]}`)
	res2 := json.RawMessage(`{"hits":[{"loreId":"lore:herons","title":"The three herons","text":"The herons were cast from the bells of the old temple after the flood of the ninth year.","score":0.82}]}`)
	a1, _ := provenance.ArgsHash(map[string]any{"locationId": "loc:market-square"})
	a2, _ := provenance.ArgsHash(map[string]any{"query": "market square", "limit": 3})
	r1, _ := provenance.ResultHash(res1)
	r2, _ := provenance.ResultHash(res2)
	origin := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	return &events.Proposal{
		ProposalID: "ambience:0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b:0", Kind: events.KindAmbience, SchemaVersion: events.ProposalSchemaVersion,
		CorrelationID: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", CausationID: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", AgentRole: "ambience",
		Actor:   events.Actor{Kind: "player", ID: "player:ada"},
		Payload: json.RawMessage(`{"locationId":"loc:market-square","text":"Copper pans ring as a cart jolts past the heron fountain; somewhere a vendor haggles over the price of blue wool.","mood":"bustling"}`),
		Provenance: &events.Provenance{Provider: "openai", Model: "gpt-4o-mini",
			PromptTemplate: &events.TemplateRef{ID: "ambience", Version: "1.2.0", SHA256: provenance.Sum([]byte("t"))},
			ContextHash:    provenance.Sum([]byte("c")),
			ToolCalls: []events.ToolCall{{Server: "world", Tool: "get-location", ArgsHash: a1, ResultHash: r1, Result: res1},
				{Server: "lore", Tool: "search-lore", ArgsHash: a2, ResultHash: r2, Result: res2}},
			Tokens: events.Tokens{Prompt: 812, Completion: 64}, CostUSD: 0.00021, Temperature: 0.7, Seed: 42, LatencyMs: 812.5},
		Route: events.Route{Pending: append([]string(nil), aiRoute...)}, CreatedUTC: origin.Add(time.Second), OriginUTC: &origin,
	}
}

type gateKeys map[string]*attest.Signer

func newKeys(t testing.TB, gates ...string) (gateKeys, *attest.Keyring) {
	t.Helper()
	ks, ring := gateKeys{}, attest.NewKeyring()
	for _, g := range gates {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s, err := attest.NewSigner(g, priv)
		if err != nil {
			t.Fatal(err)
		}
		ks[g] = s
		ring.Add(g, pub)
	}
	return ks, ring
}

// pass records gate's hop as the chain does and signs it.
func (ks gateKeys) pass(t testing.TB, p *events.Proposal, gate, outcome string, mod func(*events.Hop)) {
	t.Helper()
	h := events.Hop{Gate: gate, Outcome: outcome, At: time.Now().UTC()}
	if mod != nil {
		mod(&h)
	}
	p.Route.Trail = append(p.Route.Trail, h)
	if len(p.Route.Pending) > 0 && p.Route.Pending[0] == gate && outcome != events.OutcomeRejected && outcome != events.OutcomeHeld {
		p.Route.Pending = p.Route.Pending[1:]
	}
	if err := ks[gate].SignLast(p); err != nil {
		t.Fatal(err)
	}
}

func (ks gateKeys) passAll(t testing.TB, p *events.Proposal, route []string) {
	for _, g := range route {
		ks.pass(t, p, g, events.OutcomePassed, func(h *events.Hop) {
			if g == "schema" {
				h.Emitter = p.AgentRole
			}
		})
	}
}

func refusedAt(t *testing.T, err error, hop string, words ...string) {
	t.Helper()
	var r *attest.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("want a refusal naming %s, got %v", hop, err)
	}
	if r.Hop != hop {
		t.Fatalf("refusal names hop %q, want %q: %s", r.Hop, hop, r.Reason)
	}
	for _, w := range words {
		if !strings.Contains(r.Reason, w) {
			t.Errorf("reason %q lacks %q", r.Reason, w)
		}
	}
}

func TestVerifyAcceptsTheFullRouteAndRefusesEveryShortcut(t *testing.T) {
	all := append(append([]string(nil), aiRoute...), "approval")
	ks, ring := newKeys(t, all...)

	honest := realistic(t)
	ks.passAll(t, honest, aiRoute)
	if err := ring.Verify(honest, aiRoute, "approval", "schema"); err != nil {
		t.Fatalf("honest proposal refused: %v", err)
	}

	t.Run("a transient refusal then a pass is one decision", func(t *testing.T) {
		p := realistic(t)
		ks.passAll(t, p, aiRoute[:5])
		ks.pass(t, p, "rate", events.OutcomeRejected, nil)
		ks.pass(t, p, "rate", events.OutcomePassed, nil) // round 1
		ks.pass(t, p, "audit", events.OutcomePassed, nil)
		if err := ring.Verify(p, aiRoute, "approval", "schema"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a compromised gate skips the gates after it", func(t *testing.T) {
		p := realistic(t)
		ks.passAll(t, p, []string{"schema"})
		ks.pass(t, p, "audit", events.OutcomePassed, nil)
		refusedAt(t, ring.Verify(p, aiRoute, "approval", "schema"), "safety", "missing")
	})
	t.Run("the trail stops early", func(t *testing.T) {
		p := realistic(t)
		ks.passAll(t, p, aiRoute[:6])
		refusedAt(t, ring.Verify(p, aiRoute, "approval", "schema"), "audit", "missing")
	})
	t.Run("content changed after the gates passed it", func(t *testing.T) {
		p := realistic(t)
		ks.passAll(t, p, aiRoute)
		p.Payload = json.RawMessage(`{"locationId":"loc:market-square","text":"<script>alert(1)</script>","mood":"bustling"}`)
		refusedAt(t, ring.Verify(p, aiRoute, "approval", "schema"), "schema", "signature does not match")
	})
	t.Run("a gate signs for another", func(t *testing.T) {
		p := realistic(t)
		ks.passAll(t, p, []string{"schema"})
		p.Route.Trail = append(p.Route.Trail, events.Hop{Gate: "safety", Outcome: events.OutcomePassed, At: time.Now()})
		forger, _ := attest.NewSigner("safety", mustKey(t))
		if err := forger.SignLast(p); err != nil {
			t.Fatal(err)
		}
		ks.passAll(t, p, aiRoute[2:])
		refusedAt(t, ring.Verify(p, aiRoute, "approval", "schema"), "safety", "not one of the safety gate's keys")
	})
	t.Run("a hop copied from another proposal", func(t *testing.T) {
		p := realistic(t)
		p.ProposalID += "-other"
		p.Route.Trail = append([]events.Hop(nil), honest.Route.Trail...)
		refusedAt(t, ring.Verify(p, aiRoute, "approval", "schema"), "schema", "signature")
	})
	t.Run("unsigned hop", func(t *testing.T) {
		p := realistic(t)
		ks.passAll(t, p, aiRoute)
		p.Route.Trail[3].Sig = ""
		refusedAt(t, ring.Verify(p, aiRoute, "approval", "schema"), "dedup", "not signed")
	})
	t.Run("gates out of order", func(t *testing.T) {
		p := realistic(t)
		ks.passAll(t, p, []string{"schema", "invariant", "safety", "dedup", "replay", "rate", "audit"})
		refusedAt(t, ring.Verify(p, aiRoute, "approval", "schema"), "safety")
	})
	t.Run("emitter may not propose the kind", func(t *testing.T) {
		p := realistic(t)
		ks.pass(t, p, "schema", events.OutcomePassed, func(h *events.Hop) { h.Emitter = events.EmitterWorldRules })
		ks.passAll(t, p, aiRoute[1:])
		refusedAt(t, ring.Verify(p, aiRoute, "approval", "schema"), "schema", "may not propose ambience")
	})
	t.Run("a destructive kind passed approval without a person", func(t *testing.T) {
		route := []string{"schema", "safety", "invariant", "approval", "audit"}
		p := realistic(t)
		p.Kind, p.AgentRole, p.RequiresApproval = events.KindNPCRemoved, "operator", true
		p.Payload = json.RawMessage(`{"npcId":"npc:bram","reason":"retired"}`)
		ks.passAll(t, p, route)
		refusedAt(t, ring.Verify(p, route, "approval", "schema"), "approval", "authenticated approver")
		q := realistic(t)
		q.Kind, q.AgentRole, q.RequiresApproval = events.KindNPCRemoved, "operator", true
		q.Payload = p.Payload
		ks.passAll(t, q, route[:3])
		ks.pass(t, q, "approval", events.OutcomeHeld, nil)
		ks.pass(t, q, "approval", events.OutcomeApproved, func(h *events.Hop) { h.Approver = "operator:ada" })
		ks.pass(t, q, "audit", events.OutcomePassed, nil)
		if err := ring.Verify(q, route, "approval", "schema"); err != nil {
			t.Fatalf("approved proposal refused: %v", err)
		}
		q.Route.Trail[4].Approver = "operator:mallory" // the approver is signed
		refusedAt(t, ring.Verify(q, route, "approval", "schema"), "approval", "signature")
	})
}

func mustKey(t testing.TB) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Rotation: after a gate's key is replaced, hops the old key signed verify as long as the old
// public key file is kept, and stop verifying once it is removed.
func TestKeyFilesAndRotation(t *testing.T) {
	dir := t.TempDir()
	old, err := attest.Generate(dir, "schema", false)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "schema.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if again, _ := attest.Generate(dir, "schema", false); again.KeyID() != old.KeyID() {
		t.Fatal("Generate without replace changed an existing key")
	}
	signedByOld := realistic(t)
	gateKeys{"schema": old}.pass(t, signedByOld, "schema", events.OutcomePassed, func(h *events.Hop) { h.Emitter = "ambience" })

	rotated, err := attest.Generate(dir, "schema", true)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.KeyID() == old.KeyID() {
		t.Fatal("rotation kept the key")
	}
	signedByNew := realistic(t)
	gateKeys{"schema": rotated}.pass(t, signedByNew, "schema", events.OutcomePassed, func(h *events.Hop) { h.Emitter = "ambience" })
	ring, err := attest.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ids := ring.KeyIDs("schema"); len(ids) != 2 {
		t.Fatalf("keyring holds %v for schema, want the old and the new key", ids)
	}
	for name, p := range map[string]*events.Proposal{"old": signedByOld, "new": signedByNew} {
		d, _ := attest.Digest(p)
		if err := ring.CheckHop(p, d, 0); err != nil {
			t.Errorf("hop signed by the %s key: %v", name, err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "schema."+old.KeyID()+".pub")); err != nil {
		t.Fatal(err)
	}
	ring, _ = attest.LoadKeyring(dir)
	d, _ := attest.Digest(signedByOld)
	if err := ring.CheckHop(signedByOld, d, 0); err == nil {
		t.Fatal("a hop signed by a retired key still verifies")
	}
	// A private key others may read is refused.
	if err := os.Chmod(filepath.Join(dir, "schema.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := attest.LoadSigner(dir, "schema"); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("a world-readable key was loaded: %v", err)
	}
	// Group read only, as a Kubernetes Secret volume mounts it for the pod's fsGroup: loaded.
	// Group write is refused.
	for mode, ok := range map[os.FileMode]bool{0o440: true, 0o400: true, 0o460: false, 0o604: false} {
		if err := os.Chmod(filepath.Join(dir, "schema.key"), mode); err != nil {
			t.Fatal(err)
		}
		if _, err := attest.LoadSigner(dir, "schema"); (err == nil) != ok {
			t.Errorf("key file mode %v: loaded %v (%v), want %v", mode, err == nil, err, ok)
		}
	}
	// A public key file without a key is an error, not an empty keyring.
	if err := os.WriteFile(filepath.Join(dir, "safety.pub"), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := attest.LoadKeyring(dir); err == nil {
		t.Fatal("a public key file without a key was accepted")
	}
}

// BenchmarkAttest is the cost per proposal of attesting its decisions along a 7-gate route:
// every gate computes the digest and signs its hop; the event-processor computes the digest
// once and verifies the seven hops (as Keyring.Verify does).
func BenchmarkAttest(b *testing.B) {
	ks, ring := newKeys(b, aiRoute...)
	base := realistic(b)
	b.Run("ed25519/sign-7-gates", func(b *testing.B) {
		for b.Loop() {
			p := *base
			p.Route.Trail = nil
			ks.passAll(b, &p, aiRoute)
		}
	})
	signed := *base
	ks.passAll(b, &signed, aiRoute)
	b.Run("ed25519/verify-route", func(b *testing.B) {
		for b.Loop() {
			if err := ring.Verify(&signed, aiRoute, "approval", "schema"); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same route through one process whose gates share a key: one signature covers the
	// seven hops (RunVersion).
	sharedKs, sharedRing := sharedKeys(b, aiRoute)
	run := *base
	run.Route.Trail = nil
	sharedKs.run(b, &run, aiRoute...)
	b.Run("ed25519/sign-7-gates-one-run", func(b *testing.B) {
		for b.Loop() {
			p := *base
			p.Route.Trail = nil
			sharedKs.run(b, &p, aiRoute...)
		}
	})
	b.Run("ed25519/verify-route-one-run", func(b *testing.B) {
		for b.Loop() {
			if err := sharedRing.Verify(&run, aiRoute, "approval", "schema"); err != nil {
				b.Fatal(err)
			}
		}
	})
	// One signature and one verification alone (statement built, digest known).
	d, _ := attest.Digest(&signed)
	stmt := attest.Statement(signed.ProposalID, d, &signed.Route.Trail[0], 0)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	pub := priv.Public().(ed25519.PublicKey)
	sig := ed25519.Sign(priv, stmt)
	b.Run("ed25519/sign-one", func(b *testing.B) { // as Signer signs: curve25519-voi
		for b.Loop() {
			voi.Sign(voi.PrivateKey(priv), stmt)
		}
	})
	b.Run("ed25519/verify-one", func(b *testing.B) {
		for b.Loop() {
			if !ed25519.Verify(pub, stmt, sig) {
				b.Fatal("bad signature")
			}
		}
	})
	hk := make([]byte, 32)
	b.Run("hmac/one", func(b *testing.B) {
		for b.Loop() {
			m := hmac.New(sha256.New, hk)
			m.Write(stmt)
			m.Sum(nil)
		}
	})
	b.Run("digest", func(b *testing.B) {
		for b.Loop() {
			if _, err := attest.Digest(&signed); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The alternative: per-gate HMAC-SHA256 keys shared only with the verifier, over the same
	// statement and digest.
	hkeys := map[string][]byte{}
	for _, g := range aiRoute {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		hkeys[g] = k
	}
	mac := func(g string, msg []byte) string {
		m := hmac.New(sha256.New, hkeys[g])
		m.Write(msg)
		return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	b.Run("hmac/sign-7-gates", func(b *testing.B) {
		for b.Loop() {
			p := *base
			p.Route.Trail = nil
			for _, g := range aiRoute {
				p.Route.Trail = append(p.Route.Trail, events.Hop{Gate: g, Outcome: events.OutcomePassed})
				d, _ := attest.Digest(&p)
				h := &p.Route.Trail[len(p.Route.Trail)-1]
				h.Sig = mac(g, attest.Statement(p.ProposalID, d, h, 0))
			}
		}
	})
	b.Run("hmac/verify-route", func(b *testing.B) {
		p := *base
		p.Route.Trail = nil
		for _, g := range aiRoute {
			p.Route.Trail = append(p.Route.Trail, events.Hop{Gate: g, Outcome: events.OutcomePassed})
		}
		d, _ := attest.Digest(&p)
		for i := range p.Route.Trail {
			p.Route.Trail[i].Sig = mac(p.Route.Trail[i].Gate, attest.Statement(p.ProposalID, d, &p.Route.Trail[i], 0))
		}
		for b.Loop() {
			d, _ := attest.Digest(&p)
			for i := range p.Route.Trail {
				h := &p.Route.Trail[i]
				if !hmac.Equal([]byte(h.Sig), []byte(mac(h.Gate, attest.Statement(p.ProposalID, d, h, 0)))) {
					b.Fatal("bad mac")
				}
			}
		}
	})
}

// The event-processor's directory gets the public keys only, and follows rotations.
func TestExportPublicCopiesOnlyPublicKeys(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "attest-keys")
	for _, g := range []string{"schema", "safety"} {
		if _, err := attest.Generate(dir, g, false); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := attest.LoadSigner(dir, "safety")
	if _, err := attest.Generate(dir, "safety", true); err != nil {
		t.Fatal(err)
	}
	names, err := attest.ExportPublic(dir, out)
	if err != nil || len(names) != 3 {
		t.Fatalf("exported %v (%v); want schema.pub, safety.pub and the old safety key", names, err)
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pub") {
			t.Errorf("%s left the private key directory", e.Name())
		}
	}
	ring, err := attest.LoadKeyring(out)
	if err != nil || len(ring.KeyIDs("safety")) != 2 || len(ring.KeyIDs("schema")) != 1 {
		t.Fatalf("exported keyring: %v", err)
	}
	// The old key retired in dir: the next export removes it from out too.
	if err := os.Remove(filepath.Join(dir, "safety."+old.KeyID()+".pub")); err != nil {
		t.Fatal(err)
	}
	if _, err := attest.ExportPublic(dir, out); err != nil {
		t.Fatal(err)
	}
	if ring, _ := attest.LoadKeyring(out); len(ring.KeyIDs("safety")) != 1 {
		t.Fatalf("a retired key is still exported: %v", ring.KeyIDs("safety"))
	}
	if _, err := attest.ExportPublic(dir, dir); err == nil {
		t.Fatal("exporting into the private key directory was allowed")
	}
}

// The digest leaves the route out without marshalling it; its value is the one proposals
// signed before were signed with: the whole proposal marshalled, the route deleted, the rest
// in provenance.Canonical's encoding.
func TestDigestIsTheCanonicalProposalWithoutItsRoute(t *testing.T) {
	ks, _ := newKeys(t, aiRoute...)
	p := *realistic(t)
	ks.passAll(t, &p, aiRoute)
	raw, err := json.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "route")
	rest, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := provenance.Canonical(rest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := attest.Digest(&p)
	if err != nil || got != provenance.Sum(canonical) {
		t.Fatalf("digest %s (%v), want %s", got, err, provenance.Sum(canonical))
	}
	if len(p.Route.Trail) != len(aiRoute) {
		t.Fatalf("the digest changed the proposal's trail: %d hops", len(p.Route.Trail))
	}
}

// The digest's definition must never drift: hops signed before a change, and audit records,
// must verify after it. These are the digests of the version 1 definition, computed with the
// encoding/json round trip the package used before its one-pass canonical encoding.
func TestDigestIsPinned(t *testing.T) {
	p := realistic(t)
	for _, c := range []struct{ payload, want string }{
		{"", "4fb8e7576634599fef8da6b2646a89fefb9f8ada0e2ba7e56e102f8e12756e8d"},
		{`{"locationId":"loc:x","text":"a <b> & \"c\" — é \u2028 ’","mood":"calm"}`, "0b2347f71b80bbb0735f9e5b09680d5855957d7c1425909dacff4312466e5c95"},
	} {
		if c.payload != "" {
			p.Payload = json.RawMessage(c.payload)
		}
		if got, err := attest.Digest(p); err != nil || got != c.want {
			t.Errorf("digest with payload %q: %s (%v), want %s", c.payload, got, err, c.want)
		}
	}
}
