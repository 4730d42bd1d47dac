package gates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/fallback"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// dedup rejects content that is a near-duplicate of content recently accepted for the same kind
// and target (its scope, per kind: the payload's Target — ambience and quest seeds per
// location, dialogue per NPC–player pair, so an NPC may tell two players the same news; see
// the gate's README), and offers the accepted content with the refusal, so that the request
// is answered with it instead of a regeneration (a reused outcome). Fallback content is never refused (see
// fallback.IsContent). Accepted fingerprints live in the KV bucket natsx.BucketDedup, one key per kind
// and target holding the latest Keep entries; a check and its insert are one compare-and-set,
// so two replicas cannot both accept near-duplicates. "Accepted" means passed this gate and not
// refused for good after it: content refused after this gate must not make the next, similar
// proposal — its regeneration, whose proposal id differs — a duplicate of it. A later gate of
// the same run (fusion) has RefusedLater remove the fingerprint at once; a refusal anywhere
// else (a gate in another process, the event-processor at commit) reaches the gate's own
// consumer of rejections (DedupRejectionsDurable, see forgetRefused), which removes it then.
type dedup struct {
	locks keyLocks
	kv    jetstream.KeyValue
	cfg   DedupConfig
	now   func() time.Time
}

// Dedup is the dedup gate's name.
const Dedup = events.GateDedup

// dedupGate declares the dedup gate (see Spec).
var dedupGate = Spec{
	Name: Dedup, New: newDedup,
	Summary: "near-duplicates of recently accepted content (SimHash fingerprints in KV)",
	Buckets: []natsauth.Bucket{{Name: natsx.BucketDedup}},
	// Every rejection: the fingerprint of content refused for good after this gate is removed.
	Consumers: []Consumer{{
		Durable: DedupRejectionsDurable, Subjects: []string{events.SubjectRejectedAll},
		Handler: func(g Gate, d Deps) (message.HandlerFunc, error) {
			return g.(*dedup).forgetRefused(*d.Routes, d.Logger), nil
		},
	}},
}

func newDedup(ctx context.Context, d Deps) (Gate, error) {
	if d.JetStream == nil {
		return nil, errors.New("the dedup gate needs JetStream (KV bucket " + natsx.BucketDedup + ")")
	}
	kv, err := natsx.AwaitKeyValue(ctx, d.JetStream, natsx.BucketDedup, d.Logger)
	if err != nil {
		return nil, fmt.Errorf("%w (provision the topology first)", err)
	}
	return &dedup{kv: kv, cfg: d.Config.Dedup, now: d.Now}, nil
}

func (*dedup) Name() string { return Dedup }

// fingerprint is one accepted text, with its payload when it is small enough to offer for
// reuse (maxReusable): the value of one key is at most Keep of them.
type fingerprint struct {
	FP         string          `json:"fp"` // hex uint64
	ProposalID string          `json:"proposalId"`
	At         time.Time       `json:"at"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

// maxReusable bounds the payload a fingerprint keeps for reuse (a quest seed is about 400
// bytes): larger content is refused as a duplicate without an offer, and regenerated.
const maxReusable = 4 << 10

type fingerprints struct {
	Entries []fingerprint `json:"entries"`
}

// dedupKey is the KV key of a kind and target (hashed: ids hold characters keys cannot).
func dedupKey(kind, target string) string {
	h := sha256.Sum256([]byte(target))
	return kind + "." + hex.EncodeToString(h[:12])
}

// nearDuplicate is the pure rule: the first live entry of another proposal within maxDistance.
func nearDuplicate(fp uint64, proposalID string, entries []fingerprint, maxDistance int, since time.Time) (fingerprint, int, bool) {
	for _, e := range entries {
		if e.ProposalID == proposalID || e.At.Before(since) {
			continue
		}
		other, err := strconv.ParseUint(e.FP, 16, 64)
		if err != nil {
			continue
		}
		if d := Hamming(fp, other); d <= maxDistance {
			return e, d, true
		}
	}
	return fingerprint{}, 0, false
}

func (g *dedup) Check(ctx context.Context, p *events.Proposal) (Decision, error) {
	payload, err := events.DecodePayload(p.Kind, p.Payload)
	if err != nil {
		return Decision{}, err
	}
	text := payload.Content()
	if text == "" {
		return Pass(), nil
	}
	if p.Provenance != nil && p.Provenance.Fallback != "" && fallback.IsContent(p.Kind, p.Payload) {
		// The answer of last resort, repeated by design: never refused for repetition, and not
		// remembered (the model's own lines are not compared with it).
		return Pass(), nil
	}
	fp := SimHash(text)
	key := dedupKey(p.Kind, payload.Target())
	defer g.locks.lock(key)()
	for range 20 {
		var cur fingerprints
		var rev uint64
		e, err := g.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return Decision{}, fmt.Errorf("read fingerprints: %w", err)
		default:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &cur); err != nil {
				cur = fingerprints{} // unreadable: start again rather than block the kind
			}
		}
		now := g.now()
		since := now.Add(-g.cfg.Window)
		for _, x := range cur.Entries {
			if x.ProposalID == p.ProposalID {
				return Pass(), nil // already accepted: a redelivery
			}
		}
		if prev, d, ok := nearDuplicate(fp, p.ProposalID, cur.Entries, g.cfg.MaxDistance, since); ok {
			// The accepted content goes with the refusal: the request is answered with it
			// (events.Rejection.Reusable, a reused outcome) instead of paying for a regeneration.
			why := "write something new"
			if len(prev.Payload) > 0 {
				why = "that content answers the request"
			}
			return Reject(events.CodeDuplicate,
				fmt.Sprintf("This %s is a near-duplicate of proposal %s, accepted at %s for the same target: %s.", p.Kind, prev.ProposalID, prev.At.UTC().Format(time.RFC3339), why),
				events.DuplicateDetails(prev.ProposalID, prev.At, prev.Payload, d, g.cfg.MaxDistance)), nil
		}
		next := fingerprints{Entries: make([]fingerprint, 0, len(cur.Entries)+1)}
		for _, x := range cur.Entries {
			if !x.At.Before(since) {
				next.Entries = append(next.Entries, x)
			}
		}
		entry := fingerprint{FP: strconv.FormatUint(fp, 16), ProposalID: p.ProposalID, At: now.UTC()}
		if len(p.Payload) <= maxReusable {
			entry.Payload = p.Payload
		}
		next.Entries = append(next.Entries, entry)
		if over := len(next.Entries) - g.cfg.Keep; over > 0 {
			next.Entries = next.Entries[over:]
		}
		data, err := json.Marshal(next)
		if err != nil {
			return Decision{}, err
		}
		if rev == 0 {
			_, err = g.kv.Create(ctx, key, data)
		} else {
			_, err = g.kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			return Pass(), nil
		}
		if !isConflict(err) {
			return Decision{}, fmt.Errorf("store fingerprint: %w", err)
		}
	}
	return Decision{}, errors.New("store fingerprint: too many concurrent updates of one target")
}

// RefusedLater forgets p's fingerprint: a later gate of the run refused it for good, so the
// content will not be committed and must not make similar content a duplicate.
func (g *dedup) RefusedLater(ctx context.Context, p *events.Proposal) error {
	_, err := g.forget(ctx, p)
	return err
}

// forget removes p's fingerprint, and only p's: the entries of its kind and target that carry
// its proposal id, written back with compare-and-set on the revision read, so that a
// fingerprint another proposal added meanwhile is never lost. It reports whether there was one
// to remove; forgetting what is not there (forgotten already, never fingerprinted, out of the
// window) is no error.
func (g *dedup) forget(ctx context.Context, p *events.Proposal) (bool, error) {
	payload, err := events.DecodePayload(p.Kind, p.Payload)
	if err != nil || payload.Content() == "" {
		return false, nil // never fingerprinted
	}
	key := dedupKey(p.Kind, payload.Target())
	defer g.locks.lock(key)()
	for range 20 {
		e, err := g.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("read fingerprints: %w", err)
		}
		var cur fingerprints
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			return false, nil // unreadable: Check starts again from nothing
		}
		keep := slices.DeleteFunc(slices.Clone(cur.Entries), func(x fingerprint) bool { return x.ProposalID == p.ProposalID })
		if len(keep) == len(cur.Entries) {
			return false, nil
		}
		data, err := json.Marshal(fingerprints{Entries: keep})
		if err != nil {
			return false, err
		}
		if _, err = g.kv.Update(ctx, key, data, e.Revision()); err == nil {
			return true, nil
		} else if !isConflict(err) {
			return false, fmt.Errorf("forget fingerprint: %w", err)
		}
	}
	return false, errors.New("forget fingerprint: too many concurrent updates of one target")
}

// isConflict reports a compare-and-set that lost to another writer.
func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}
