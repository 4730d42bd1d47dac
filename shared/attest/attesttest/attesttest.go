// Package attesttest gives tests and harnesses in-memory gate keys: a signer per known gate
// and the keyring that accepts them, and a way to sign a proposal along its configured route
// as honest gates would (for tests that publish straight to proposals.validated).
package attesttest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/shared/attest"
)

// Keys are one in-memory key per known gate.
type Keys struct {
	Signers map[string]*attest.Signer
	Ring    *attest.Keyring
	pubs    map[string]ed25519.PublicKey
}

// WritePublic writes each gate's public key to dir as <gate>.pub, for a process that loads its
// keyring from files (event-processor -attest-keys).
func (k *Keys) WritePublic(dir string) error {
	for g, pub := range k.pubs {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, g+".pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// New generates a key per known gate.
func New() *Keys { return generate(false) }

// NewShared generates one key that every known gate signs with, as the gates of one process
// may (attest.GenerateShared): a fused run of them is signed once.
func NewShared() *Keys { return generate(true) }

func generate(shared bool) *Keys {
	k := &Keys{Signers: map[string]*attest.Signer{}, Ring: attest.NewKeyring(), pubs: map[string]ed25519.PublicKey{}}
	var pub ed25519.PublicKey
	var priv ed25519.PrivateKey
	for _, g := range route.Known() {
		if pub == nil || !shared {
			var err error
			if pub, priv, err = ed25519.GenerateKey(rand.Reader); err != nil {
				panic(err) // crypto/rand does not fail
			}
		}
		s, err := attest.NewSigner(g, priv)
		if err != nil {
			panic(err)
		}
		k.Signers[g] = s
		k.Ring.Add(g, pub)
		k.pubs[g] = pub
	}
	return k
}

// PassAll records and signs a passing hop of every gate of p's kind's default route (an
// approval by approver for the approval gate), emptying Route.Pending: p is then what honest
// gates forward to proposals.validated.
func (k *Keys) PassAll(p *events.Proposal, approver string) error {
	hops, err := route.Default().For(p.Kind)
	if err != nil {
		return err
	}
	for _, g := range hops {
		h := events.Hop{Gate: g, Outcome: events.OutcomePassed, At: time.Now().UTC()}
		switch g {
		case events.GateSchema:
			h.Emitter = p.AgentRole
		case events.GateApproval:
			h.Outcome, h.Approver = events.OutcomeApproved, approver
		}
		p.Route.Trail = append(p.Route.Trail, h)
		if err := k.Signers[g].SignLast(p); err != nil {
			return err
		}
	}
	p.Route.Pending = nil
	return nil
}
