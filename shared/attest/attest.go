// Package attest makes gate decisions verifiable: each gate signs its hop with its own Ed25519
// key, and the event-processor commits a proposal only if every gate of its kind's configured
// route passed it, in order, each with a valid signature over exactly the content committed.
// A compromised gate (or emitter) can then neither skip a gate after it (the missing hop has no
// signature) nor change the content another gate passed (the digest would differ), nor sign for
// another gate (it holds only its own key).
//
// # What a gate signs (version 1)
//
// Digest(p): lower-case hex SHA-256 of provenance.Canonical of the proposal without its route
// (the content the event-processor commits, with its provenance, attempt and ids).
//
// Statement: the canonical JSON array
//
//	["worldgate.attest/v1", proposalId, digest, gate, outcome, round, emitter, approver]
//
// where round is how many hops of the same gate precede this one in the trail (a gate decides
// again after a transient refusal), emitter is the schema gate's reading of the emit subject
// ("" for other gates) and approver the authenticated person on the approval gate's "approved"
// hop ("" otherwise). The hop carries KeyID (the first 16 hex digits of the SHA-256 of the
// public key's PKIX encoding) and Sig (base64url, no padding).
//
// # One signature for a process's run (version 2)
//
// Gates fused in one process decide one after another on the proposal before it leaves the
// process (a run). Where their keys are one key (a process is the unit of trust: its gates
// could be compromised together; GenerateShared), the run is signed once, on its last hop,
// and the hops before it in the run carry neither KeyID nor Sig. The statement of such a
// signature names every hop it covers:
//
//	["worldgate.attest/v2", proposalId, digest, [[gate, outcome, round, emitter, approver], …]]
//
// A signature covers the hops since the previous signed hop of the trail, and is accepted
// only with a key accepted for the gate of every hop it covers; a signature covering one hop
// is the version 1 statement. The event-processor then verifies one signature per process a
// proposal passed instead of one per gate.
//
// # Why Ed25519
//
// BenchmarkAttest (attest_test.go) measured, on the shared 2-core machine, signing and
// verifying one realistic proposal (payload, provenance with two tool results) along a 7-gate
// route: see docs/attestation.md for the figures. Per-gate HMAC keys are cheaper, but the
// verifier then holds every gate's key and can forge any hop, and nothing else (the audit
// gate, `worldgate trace`) can check a hop without being able to forge it; Ed25519 public keys
// let anyone verify and only the gate sign, at a cost small against a gate's own work.
//
// # Why in shared
//
// The gate service signs, the event-processor (and the ai-worker, the dev tooling) verify: the
// package sits below the services so that none of them imports another. It is not in the
// events module, the contract game backends import, because it needs curve25519-voi (a
// batch-verifying Ed25519 implementation with assembly) that no publisher uses: publishers never
// sign or verify a hop.
package attest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/provenance"
)

// Version is the first element of a statement signing one hop.
const Version = "worldgate.attest/v1"

// RunVersion is the first element of a statement signing several hops of one run at once.
const RunVersion = "worldgate.attest/v2"

// Digest is the SHA-256 of the canonical proposal without its route.
func Digest(p *events.Proposal) (string, error) {
	// The route is left out of the digest: it is not marshalled (its trail, with every
	// signature, is most of a signed proposal's bytes), and its empty form is left out of the
	// canonical encoding.
	content := *p
	content.Route = events.Route{}
	raw, err := json.Marshal(&content)
	if err != nil {
		return "", fmt.Errorf("digest of proposal %s: %w", p.ProposalID, err)
	}
	canonical, err := provenance.CanonicalWithout(raw, "route")
	if err != nil {
		return "", fmt.Errorf("digest of proposal %s: %w", p.ProposalID, err)
	}
	return provenance.Sum(canonical), nil
}

// Statement is the exact bytes a gate signs for hop h, the round-th decision of h.Gate on the
// proposal proposalID whose content has digest.
func Statement(proposalID, digest string, h *events.Hop, round int) []byte {
	b, _ := json.Marshal([]any{Version, proposalID, digest, h.Gate, h.Outcome, round, h.Emitter, h.Approver}) // strings and an int: cannot fail
	return b
}

// RunStatement is the exact bytes signed for hops from..to of p's trail (to included), whose
// content has digest: Statement for one hop, the version 2 statement naming each hop for
// several.
func RunStatement(proposalID, digest string, trail []events.Hop, from, to int) []byte {
	if from == to {
		return Statement(proposalID, digest, &trail[to], Round(trail, to))
	}
	hops := make([]any, 0, to-from+1)
	for i := from; i <= to; i++ {
		h := &trail[i]
		hops = append(hops, []any{h.Gate, h.Outcome, Round(trail, i), h.Emitter, h.Approver})
	}
	b, _ := json.Marshal([]any{RunVersion, proposalID, digest, hops}) // strings and ints: cannot fail
	return b
}

// Covering is the signature that covers hop i of trail: the first signed hop at or after i
// (to), and the first hop that signature covers (from: the hop after the previous signed one).
// ok is false when no hop at or after i is signed.
func Covering(trail []events.Hop, i int) (from, to int, ok bool) {
	to = i
	for to < len(trail) && !signed(&trail[to]) {
		to++
	}
	if to == len(trail) {
		return 0, 0, false
	}
	from = i
	for from > 0 && !signed(&trail[from-1]) {
		from--
	}
	return from, to, true
}

func signed(h *events.Hop) bool { return h.Sig != "" || h.KeyID != "" }

// Round is how many hops of gate precede index i of trail.
func Round(trail []events.Hop, i int) int {
	n := 0
	for _, h := range trail[:i] {
		if h.Gate == trail[i].Gate {
			n++
		}
	}
	return n
}

// KeyID names a public key: the first 16 hex digits of the SHA-256 of its PKIX encoding.
func KeyID(pub ed25519.PublicKey) string {
	der, err := marshalPublic(pub)
	if err != nil {
		return ""
	}
	s := sha256.Sum256(der)
	return hex.EncodeToString(s[:8])
}

// Signer signs one gate's hops.
type Signer struct {
	gate  string
	keyID string
	key   voi.PrivateKey
}

// NewSigner returns a signer for gate with key.
func NewSigner(gate string, key ed25519.PrivateKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("attest: the %s gate's key is not an Ed25519 private key", gate)
	}
	return &Signer{gate: gate, keyID: KeyID(key.Public().(ed25519.PublicKey)), key: voi.PrivateKey(key)}, nil
}

// Gate is the gate the signer signs for.
func (s *Signer) Gate() string { return s.gate }

// KeyID is the id of the signer's key.
func (s *Signer) KeyID() string { return s.keyID }

// SignLast signs the last hop of p's trail, which must be the signer's gate's.
func (s *Signer) SignLast(p *events.Proposal) error {
	digest, err := Digest(p)
	if err != nil {
		return err
	}
	return s.SignLastWith(p, digest)
}

// SignLastWith is SignLast with the digest already computed.
func (s *Signer) SignLastWith(p *events.Proposal, digest string) error {
	n := len(p.Route.Trail)
	if n == 0 {
		return errors.New("attest: no hop to sign")
	}
	h := &p.Route.Trail[n-1]
	if h.Gate != s.gate {
		return fmt.Errorf("attest: the %s gate's key cannot sign a hop of the %s gate", s.gate, h.Gate)
	}
	h.KeyID = s.keyID
	h.Sig = base64.RawURLEncoding.EncodeToString(voi.Sign(s.key, Statement(p.ProposalID, digest, h, Round(p.Route.Trail, n-1))))
	return nil
}

// SignRunWith signs the hops from..last of p's trail with one signature, on the last hop (the
// version 2 statement; from the last hop alone, SignLastWith). The last hop must be the
// signer's gate's; the caller vouches that the signer's key is each earlier hop's gate's key
// too (gates of one process sharing one key): the keyring accepts the signature only then.
// Signatures the hops from..last-1 carry are removed. After an unsigned hop before from (a
// trail forged upstream), the signature is read as covering that hop too, and verifies for
// nobody.
func (s *Signer) SignRunWith(p *events.Proposal, digest string, from int) error {
	n := len(p.Route.Trail)
	if from < 0 || from >= n {
		return fmt.Errorf("attest: no hop %d to sign from (the trail has %d)", from, n)
	}
	h := &p.Route.Trail[n-1]
	if h.Gate != s.gate {
		return fmt.Errorf("attest: the %s gate's key cannot sign a hop of the %s gate", s.gate, h.Gate)
	}
	for i := from; i < n-1; i++ {
		p.Route.Trail[i].KeyID, p.Route.Trail[i].Sig = "", ""
	}
	h.KeyID = s.keyID
	h.Sig = base64.RawURLEncoding.EncodeToString(voi.Sign(s.key, RunStatement(p.ProposalID, digest, p.Route.Trail, from, n-1)))
	return nil
}

// Keyring holds the public keys accepted per gate: several during a rotation.
type Keyring struct {
	keys map[string]map[string]*publicKey // gate → key id → key
}

// publicKey is an accepted key: its encoding, and the key decompressed for verification.
type publicKey struct {
	raw      string
	expanded *voi.ExpandedPublicKey
}

// NewKeyring returns an empty keyring.
func NewKeyring() *Keyring { return &Keyring{keys: map[string]map[string]*publicKey{}} }

// verifyOptions give crypto/ed25519's verification semantics: a signature valid for one is
// valid for the other.
var verifyOptions = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// Add accepts pub for gate's hops. The key is kept decompressed (curve25519-voi's expanded
// public key), so that a verification does not decode the point again: four hops' signatures
// cost about 0.6× what crypto/ed25519.Verify takes (BenchmarkAttest/ed25519/verify-route). A key that is not a point of
// the curve verifies nothing, as with crypto/ed25519.
func (k *Keyring) Add(gate string, pub ed25519.PublicKey) {
	if k.keys[gate] == nil {
		k.keys[gate] = map[string]*publicKey{}
	}
	ek, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		ek = nil
	}
	k.keys[gate][KeyID(pub)] = &publicKey{raw: string(pub), expanded: ek}
}

// Gates lists the gates with at least one key, sorted.
func (k *Keyring) Gates() []string {
	out := make([]string, 0, len(k.keys))
	for g := range k.keys {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// KeyIDs lists the ids of gate's accepted keys, sorted.
func (k *Keyring) KeyIDs(gate string) []string {
	var out []string
	for id := range k.keys[gate] {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// CheckHop verifies the signature that covers trail[i] of p (its own, or its run's: Covering),
// whose content has digest. It returns nil or a sentence saying what is wrong.
func (k *Keyring) CheckHop(p *events.Proposal, digest string, i int) error {
	from, to, ok := Covering(p.Route.Trail, i)
	if !ok {
		return fmt.Errorf("the %s hop is not signed", p.Route.Trail[i].Gate)
	}
	return k.checkRun(p, digest, from, to)
}

// checkRun verifies the signature on trail[to] over hops from..to: its key must be accepted
// for the gate of every hop it covers.
func (k *Keyring) checkRun(p *events.Proposal, digest string, from, to int) error {
	h := &p.Route.Trail[to]
	if h.Sig == "" || h.KeyID == "" {
		return fmt.Errorf("the %s hop is not signed", h.Gate)
	}
	pub, ok := k.keys[h.Gate][h.KeyID]
	if !ok {
		return fmt.Errorf("the %s hop is signed with key %s, which is not one of the %s gate's keys", h.Gate, h.KeyID, h.Gate)
	}
	for j := from; j < to; j++ {
		if g := p.Route.Trail[j].Gate; k.keys[g][h.KeyID] == nil || k.keys[g][h.KeyID].raw != pub.raw {
			return fmt.Errorf("the %s hop is covered by the %s hop's signature with key %s, which is not one of the %s gate's keys", g, h.Gate, h.KeyID, g)
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(h.Sig)
	if err != nil || !verify(pub.expanded, RunStatement(p.ProposalID, digest, p.Route.Trail, from, to), sig) {
		if from < to {
			return fmt.Errorf("the signature of the %s hop's run (%d hops, from the %s hop) does not match this content and these decisions: the content was changed after the gates decided, or a hop was forged, added or removed", h.Gate, to-from+1, p.Route.Trail[from].Gate)
		}
		return fmt.Errorf("the %s hop's signature does not match this content and decision: the content was changed after the gate decided, or the hop was forged", h.Gate)
	}
	return nil
}

// verify reports whether sig is pub's signature of msg, as crypto/ed25519.Verify would.
func verify(pub *voi.ExpandedPublicKey, msg, sig []byte) bool {
	return pub != nil && voi.VerifyExpandedWithOptions(pub, msg, sig, verifyOptions)
}

// Refusal is why a proposal's trail does not prove its route: the hop that is missing or
// forged, and a sentence.
type Refusal struct {
	Hop    string // the gate whose attestation is missing, forged or out of place
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// Verify checks that p's trail proves route, the configured route of its kind: the trail's
// passing hops (passed, or approved for the approval gate) are exactly route's gates in order,
// each with a valid signature over p's content; the schema gate attested an emitter that may
// propose the kind; the approval gate's hop, where the kind needs a person, is an approval by
// a named approver. Rejected and held hops (earlier rounds) are not counted. It returns nil or
// a *Refusal naming the hop.
func (k *Keyring) Verify(p *events.Proposal, route []string, approvalGate, schemaGate string) error {
	digest, err := Digest(p)
	if err != nil {
		return &Refusal{Reason: err.Error()}
	}
	info, _ := events.LookupKind(p.Kind)
	needsPerson := info.Destructive || p.RequiresApproval
	checked := map[int]error{} // by the signed hop: a run's signature is verified once
	var passed []int
	for i, h := range p.Route.Trail {
		if h.Outcome != events.OutcomePassed && h.Outcome != events.OutcomeApproved {
			continue
		}
		passed = append(passed, i)
	}
	for j, g := range route {
		if j >= len(passed) {
			return &Refusal{Hop: g, Reason: fmt.Sprintf("The %s gate's decision is missing: a %s proposal must pass %s, and its trail stops before %s.", g, p.Kind, strings.Join(route, " → "), g)}
		}
		i := passed[j]
		h := &p.Route.Trail[i]
		if h.Gate != g {
			return &Refusal{Hop: g, Reason: fmt.Sprintf("The %s gate's decision is missing: a %s proposal must pass %s, but after %s its trail has %s.", g, p.Kind, strings.Join(route, " → "), strings.Join(route[:j], " → "), h.Gate)}
		}
		from, to, ok := Covering(p.Route.Trail, i)
		err, done := checked[to]
		switch {
		case !ok:
			err = fmt.Errorf("the %s hop is not signed", g)
		case !done:
			err = k.checkRun(p, digest, from, to)
			checked[to] = err
		}
		if err != nil {
			return &Refusal{Hop: g, Reason: "Forged or unverifiable hop: " + err.Error() + "."}
		}
		switch {
		case g == schemaGate && !events.EmitterMay(h.Emitter, p.Kind):
			return &Refusal{Hop: g, Reason: fmt.Sprintf("The schema gate attested emitter %q, which may not propose %s.", h.Emitter, p.Kind)}
		case g == approvalGate && needsPerson && (h.Outcome != events.OutcomeApproved || strings.TrimSpace(h.Approver) == ""):
			return &Refusal{Hop: g, Reason: fmt.Sprintf("The approval gate's hop is %q without an authenticated approver, but a %s proposal needs a person's approval.", h.Outcome, p.Kind)}
		case g != approvalGate && h.Outcome != events.OutcomePassed:
			return &Refusal{Hop: g, Reason: fmt.Sprintf("The %s gate's hop says %q: only the approval gate approves.", g, h.Outcome)}
		}
	}
	if len(passed) > len(route) {
		h := p.Route.Trail[passed[len(route)]]
		return &Refusal{Hop: h.Gate, Reason: fmt.Sprintf("The trail has a %s hop after the last gate of the %s route (%s).", h.Gate, p.Kind, strings.Join(route, " → "))}
	}
	return nil
}
