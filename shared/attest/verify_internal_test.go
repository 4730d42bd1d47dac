package attest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"math/big"
	"testing"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/worldgate/worldgate/events"
)

// The keyring verifies with curve25519-voi; a signature it accepts must be exactly one that
// crypto/ed25519 accepts: valid ones, and no altered, non-canonical or small-order one.
func TestVerifyAgreesWithCryptoEd25519(t *testing.T) {
	// The group order L: S and S+L are the same scalar, and only S < L is canonical.
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	le := func(n *big.Int) []byte { // 32 bytes, little-endian
		b := n.FillBytes(make([]byte, 32))
		for i, j := 0, 31; i < j; i, j = i+1, j-1 {
			b[i], b[j] = b[j], b[i]
		}
		return b
	}
	fromLE := func(b []byte) *big.Int {
		r := make([]byte, len(b))
		for i := range b {
			r[len(b)-1-i] = b[i]
		}
		return new(big.Int).SetBytes(r)
	}
	check := func(name string, pub ed25519.PublicKey, msg, sig []byte) {
		t.Helper()
		ek, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
		if err != nil {
			ek = nil
		}
		if want, got := ed25519.Verify(pub, msg, sig), verify(ek, msg, sig); got != want {
			t.Errorf("%s: the keyring says %v, crypto/ed25519 says %v", name, got, want)
		}
	}
	for i := range 200 {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		msg := make([]byte, 1+i%97)
		_, _ = rand.Read(msg)
		sig := ed25519.Sign(priv, msg)
		check("valid", pub, msg, sig)
		bad := append([]byte(nil), sig...)
		bad[i%64] ^= 1 << (i % 8)
		check("altered signature", pub, msg, bad)
		other := append([]byte(nil), msg...)
		other[0] ^= 1
		check("other message", pub, other, sig)
		// S+L: the same signature with a non-canonical scalar.
		if s := new(big.Int).Add(fromLE(sig[32:]), l); s.BitLen() <= 256 {
			nc := append(append([]byte(nil), sig[:32]...), le(s)...)
			check("non-canonical S", pub, msg, nc)
		}
	}
	// Small-order and non-point public keys: the identity, a point of order 2, and bytes that
	// are not a point.
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	msg := []byte("worldgate")
	sig := ed25519.Sign(priv, msg)
	identity := make([]byte, 32)
	identity[0] = 1
	order2 := make([]byte, 32)
	order2[0], order2[31] = 0xec, 0x7f
	for i := 1; i < 31; i++ {
		order2[i] = 0xff
	}
	notAPoint := make([]byte, 32)
	notAPoint[0] = 2
	for name, pub := range map[string][]byte{"identity key": identity, "order-2 key": order2, "not a point": notAPoint} {
		check(name, pub, msg, sig)
		check(name+", identity signature", pub, msg, append(append([]byte(nil), identity...), make([]byte, 32)...))
	}
}

// Signing with curve25519-voi gives, byte for byte, the signature crypto/ed25519 gives: Ed25519
// signatures are deterministic, so the library that signs is invisible to every verifier.
func TestSignAgreesWithCryptoEd25519(t *testing.T) {
	for i := range 100 {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		s, err := NewSigner("schema", priv)
		if err != nil {
			t.Fatal(err)
		}
		p := &events.Proposal{ProposalID: fmt.Sprintf("p-%d", i), Kind: events.KindPlayerMoved,
			Route: events.Route{Trail: []events.Hop{{Gate: "schema", Outcome: events.OutcomePassed, Emitter: "ai-worker"}}}}
		digest := fmt.Sprintf("%064x", i)
		if err := s.SignLastWith(p, digest); err != nil {
			t.Fatal(err)
		}
		want := base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, Statement(p.ProposalID, digest, &p.Route.Trail[0], 0)))
		if p.Route.Trail[0].Sig != want {
			t.Fatalf("signature %d: %s, crypto/ed25519 gives %s", i, p.Route.Trail[0].Sig, want)
		}
	}
}
