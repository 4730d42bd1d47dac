// Package actorpolicy is the actor policy: one actor's per-actor budgets tightened (for repeat
// offenders; the moderation side sets it), stored in the control bucket (natsx.BucketBudget).
// The ai-worker's budgets write and apply it (services/ai-worker/budget), operators set and
// clear it (`worldgate budget`), and the rate gate reads it, through a watch of the policy keys
// (Keys), to tighten the actor's rate limits.
//
// It lives in shared, below the services, so that the gate does not import the ai-worker to
// read what the ai-worker writes. It is not in the events module because it is no message of
// the publishers' contract: it is a record of a bucket of the deployment (shared/natsx), and its
// tests run the in-process JetStream server (shared/natsx/natstest).
package actorpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/natsx"
)

// prefix is the control-bucket key prefix of actor policies.
const prefix = "actor."

// Keys is the key pattern of the actor policies in the control bucket: what a reader of repeat
// offenders' policies (the rate gate) is granted.
const Keys = prefix + ">"

// Key is where an actor's policy lives (hashed: actor ids may hold any character).
func Key(actor string) string { return prefix + hashID(actor) }

// IsKey reports whether a control-bucket key is an actor policy's.
func IsKey(key string) bool { return strings.HasPrefix(key, prefix) }

func hashID(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:10])
}

// Policy tightens one actor's per-actor budgets (for repeat offenders; the moderation
// side sets it): Multiplier scales the limits of every actor-scoped budget for that actor
// (0.5 halves them; 0 or 1 leaves them), and until CoolDownUntil the actor's calls are not
// paid for at all (static content instead). Replicas apply a change within a second.
type Policy struct {
	Actor         string    `json:"actor"`
	Multiplier    float64   `json:"multiplier,omitempty"`
	CoolDownUntil time.Time `json:"coolDownUntil,omitzero"`
	// DecayUntil, when set, makes the multiplier return linearly to 1 between At and
	// DecayUntil (a repeat offender's limits recover over time); after it the policy changes
	// nothing.
	DecayUntil time.Time `json:"decayUntil,omitzero"`
	// Strikes is the repeat-offender strike that set the policy (0: set by an operator).
	Strikes int       `json:"strikes,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

// MultiplierAt is the multiplier in force at now (0: the limits are unchanged).
func (p Policy) MultiplierAt(now time.Time) float64 {
	m := p.Multiplier
	if !(m > 0 && m < 1) || p.DecayUntil.IsZero() {
		return m
	}
	if !now.Before(p.DecayUntil) {
		return 0
	}
	span := p.DecayUntil.Sub(p.At)
	if span <= 0 || now.Before(p.At) {
		return m
	}
	return m + (1-m)*float64(now.Sub(p.At))/float64(span)
}

// Active reports whether p still changes anything at now: a multiplier other than 1, or a
// cool-down not yet over.
func (p Policy) Active(now time.Time) bool {
	m := p.MultiplierAt(now)
	return (m > 0 && m != 1) || now.Before(p.CoolDownUntil)
}

// Set stores p for p.Actor (the control bucket, natsx.BucketBudget).
func Set(ctx context.Context, control jetstream.KeyValue, p Policy) error {
	if p.Actor == "" {
		return errors.New("budget: an actor policy needs the actor's id")
	}
	if p.Multiplier < 0 {
		return fmt.Errorf("budget: multiplier %v is negative", p.Multiplier)
	}
	if p.At.IsZero() {
		p.At = time.Now().UTC()
	}
	raw, _ := json.Marshal(p)
	_, err := control.Put(ctx, Key(p.Actor), raw)
	return err
}

// Clear removes an actor's policy: its budgets are the file's again.
func Clear(ctx context.Context, control jetstream.KeyValue, actor string) error {
	err := control.Delete(ctx, Key(actor))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return err
}

// Get reads an actor's policy (nil when it has none).
func Get(ctx context.Context, control jetstream.KeyValue, actor string) (*Policy, error) {
	e, err := control.Get(ctx, Key(actor))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p Policy
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// List lists every actor policy in the control bucket (repeat offenders and operators'
// per-actor changes), the most recent first; Active says whether it still changes anything. js
// lists the keys (natsx.ListKeys).
func List(ctx context.Context, js jetstream.JetStream, control jetstream.KeyValue) ([]Policy, error) {
	keys, err := natsx.ListKeys(ctx, js, control.Bucket(), Keys)
	if err != nil {
		return nil, err
	}
	var out []Policy
	for _, k := range keys {
		e, err := control.Get(ctx, k)
		if err != nil {
			continue
		}
		var p Policy
		if json.Unmarshal(e.Value(), &p) == nil && p.Actor != "" {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return out, nil
}
