package attest_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/attest"
)

// sharedKeys gives the gates of fused one key (a process's gates), every other gate its own.
func sharedKeys(t testing.TB, fused []string, others ...string) (gateKeys, *attest.Keyring) {
	t.Helper()
	ks, ring := newKeys(t, others...)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range fused {
		if ks[g], err = attest.NewSigner(g, priv); err != nil {
			t.Fatal(err)
		}
		ring.Add(g, pub)
	}
	return ks, ring
}

// run records a passing hop of each of gates, as a fused process does, and signs them once
// with the last gate's signer (whose key the gates share).
func (ks gateKeys) run(t testing.TB, p *events.Proposal, gates ...string) {
	t.Helper()
	from := len(p.Route.Trail)
	for _, g := range gates {
		h := events.Hop{Gate: g, Outcome: events.OutcomePassed, At: time.Now().UTC()}
		if g == "schema" {
			h.Emitter = p.AgentRole
		}
		p.Route.Trail = append(p.Route.Trail, h)
		p.Route.Pending = slices.DeleteFunc(p.Route.Pending, func(s string) bool { return s == g })
	}
	digest, err := attest.Digest(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := ks[gates[len(gates)-1]].SignRunWith(p, digest, from); err != nil {
		t.Fatal(err)
	}
}

// A fused process signs its run of gates once; the processor accepts that signature for each
// gate it covers only where the key is that gate's, and refuses every change to the run.
func TestOneSignatureCoversAProcesssRun(t *testing.T) {
	fused := []string{"schema", "invariant", "dedup", "replay", "rate"}
	ks, ring := sharedKeys(t, fused, "safety", "audit", "approval")
	route := aiRoute // schema safety invariant dedup replay rate audit

	honest := func(t *testing.T) *events.Proposal {
		p := realistic(t)
		ks.run(t, p, "schema")
		ks.run(t, p, "safety") // its own process, its own key
		ks.run(t, p, "invariant", "dedup", "replay", "rate")
		ks.run(t, p, "audit")
		return p
	}
	p := honest(t)
	if err := ring.Verify(p, route, "approval", "schema"); err != nil {
		t.Fatalf("a run signed once refused: %v", err)
	}
	signedHops := 0
	for _, h := range p.Route.Trail {
		if h.Sig != "" {
			signedHops++
		}
	}
	if signedHops != 4 {
		t.Fatalf("%d of %d hops signed, want 4 (schema, safety, the run of four, audit)", signedHops, len(p.Route.Trail))
	}
	// Each covered hop checks on its own too (worldgate trace).
	digest, _ := attest.Digest(p)
	for i := range p.Route.Trail {
		if err := ring.CheckHop(p, digest, i); err != nil {
			t.Errorf("hop %d (%s): %v", i, p.Route.Trail[i].Gate, err)
		}
	}

	t.Run("a run's key that is not every covered gate's", func(t *testing.T) {
		// The safety gate's process (its own key) signs a run naming the invariant gate too.
		p := realistic(t)
		ks.run(t, p, "schema")
		p.Route.Trail = append(p.Route.Trail, events.Hop{Gate: "invariant", Outcome: events.OutcomePassed},
			events.Hop{Gate: "safety", Outcome: events.OutcomePassed})
		digest, _ := attest.Digest(p)
		if err := ks["safety"].SignRunWith(p, digest, 1); err != nil {
			t.Fatal(err)
		}
		refusedAt(t, ring.Verify(p, []string{"schema", "invariant", "safety"}, "approval", "schema"), "invariant", "covered by the safety hop", "not one of the invariant gate's keys")
	})
	t.Run("a hop dropped from a run", func(t *testing.T) {
		p := honest(t)
		i := slices.IndexFunc(p.Route.Trail, func(h events.Hop) bool { return h.Gate == "dedup" })
		p.Route.Trail = slices.Delete(p.Route.Trail, i, i+1)
		refusedAt(t, ring.Verify(p, slices.DeleteFunc(slices.Clone(route), func(g string) bool { return g == "dedup" }), "approval", "schema"), "invariant", "does not match")
	})
	t.Run("an unsigned hop slipped into a run", func(t *testing.T) {
		p := honest(t)
		i := slices.IndexFunc(p.Route.Trail, func(h events.Hop) bool { return h.Gate == "dedup" })
		p.Route.Trail = slices.Insert(p.Route.Trail, i, events.Hop{Gate: "dedup", Outcome: events.OutcomeRejected})
		refusedAt(t, ring.Verify(p, route, "approval", "schema"), "invariant", "does not match")
	})
	t.Run("a covered decision changed", func(t *testing.T) {
		p := honest(t)
		i := slices.IndexFunc(p.Route.Trail, func(h events.Hop) bool { return h.Gate == "replay" })
		p.Route.Trail[i].Outcome = events.OutcomeApproved
		refusedAt(t, ring.Verify(p, route, "approval", "schema"), "invariant", "does not match")
	})
	t.Run("the content changed after the run", func(t *testing.T) {
		p := honest(t)
		p.Payload = []byte(`{"locationId":"loc:market-square","text":"Something else.","mood":"calm"}`)
		refusedAt(t, ring.Verify(p, route, "approval", "schema"), "schema", "does not match")
	})
	t.Run("a hop's own signature stripped, so that the next signature seems to cover it", func(t *testing.T) {
		p := honest(t)
		p.Route.Trail[1].Sig, p.Route.Trail[1].KeyID = "", "" // safety: covered by the run after it?
		refusedAt(t, ring.Verify(p, route, "approval", "schema"), "safety", "not one of the safety gate's keys")
	})
	t.Run("the last hops of the trail unsigned", func(t *testing.T) {
		p := honest(t)
		last := len(p.Route.Trail) - 1
		p.Route.Trail[last].Sig, p.Route.Trail[last].KeyID = "", ""
		refusedAt(t, ring.Verify(p, route, "approval", "schema"), "audit", "not signed")
	})
	t.Run("a run signed after a forged unsigned hop verifies for nobody", func(t *testing.T) {
		p := realistic(t)
		p.Route.Trail = append(p.Route.Trail, events.Hop{Gate: "schema", Outcome: events.OutcomePassed, Emitter: p.AgentRole})
		ks.run(t, p, "invariant", "dedup") // the shared key is the schema gate's too: only the statement differs
		digest, _ := attest.Digest(p)
		for i := range p.Route.Trail {
			if err := ring.CheckHop(p, digest, i); err == nil {
				t.Errorf("hop %d (%s) verified", i, p.Route.Trail[i].Gate)
			}
		}
	})
}

// GenerateShared writes one key pair as each gate's: the keyring accepts it for all of them,
// a gate with a key keeps it, and a rotation keeps the old public key for every gate.
func TestGenerateSharedGivesAProcessOneKey(t *testing.T) {
	dir := t.TempDir()
	own, err := attest.Generate(dir, "audit", false)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := attest.GenerateShared(dir, []string{"schema", "invariant", "audit"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if ss["schema"].KeyID() != ss["invariant"].KeyID() {
		t.Errorf("schema %s, invariant %s: want one key", ss["schema"].KeyID(), ss["invariant"].KeyID())
	}
	if ss["audit"].KeyID() != own.KeyID() {
		t.Errorf("the audit gate's key was replaced: %s, had %s", ss["audit"].KeyID(), own.KeyID())
	}
	ring, err := attest.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"schema", "invariant"} {
		if ids := ring.KeyIDs(g); !slices.Equal(ids, []string{ss["schema"].KeyID()}) {
			t.Errorf("%s accepts %v, want the shared key", g, ids)
		}
	}
	rotated, err := attest.GenerateShared(dir, []string{"schema", "invariant"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if rotated["schema"].KeyID() == ss["schema"].KeyID() || rotated["schema"].KeyID() != rotated["invariant"].KeyID() {
		t.Errorf("rotation: schema %s, invariant %s (old %s): want one new key", rotated["schema"].KeyID(), rotated["invariant"].KeyID(), ss["schema"].KeyID())
	}
	if _, err := os.Stat(filepath.Join(dir, "invariant."+ss["schema"].KeyID()+".pub")); err != nil {
		t.Errorf("the old shared key is not kept for the invariant gate: %v", err)
	}
	if ring, err = attest.LoadKeyring(dir); err != nil || len(ring.KeyIDs("invariant")) != 2 {
		t.Errorf("after rotation the invariant gate accepts %v (%v), want the old and the new key", ring.KeyIDs("invariant"), err)
	}
}
