// Package gates holds Worldgate's proposal gates and the chain runtime they share.
//
// A gate is one small type in its own file: a Name and a Check that looks at a proposal and
// returns a Decision (pass, reject with a code and a sentence, or hold). Everything else is
// written once, in the chain (chain.go and its steps in chain_*.go): consuming proposals.gate.<name> on the durable consumer
// gate-<name>, decoding, checking the routing slip, recording the hop, publishing to the next
// hop or to proposals.rejected.<name> with a deterministic message id, metrics and logs.
// Redelivery, dead letters and acknowledgement after publishing come from shared/runtime.
//
// Fusion: when the route's next gate runs in the same process, the handler goes on into it
// instead of publishing, so consecutive local gates are decided in one hop (one consume, one
// publish, under the id of the run's first gate). Every gate still records, signs, counts and
// logs its own hop, and keeps its own consumer and subjects for what arrives there (from a gate
// in another process, or a retry). Config.NoFusion (gate -fuse=false) turns it off.
//
// A Check returns an error only for infrastructure failures (KV, graph, MCP unreachable): the
// message is then redelivered with backoff and dead-lettered past the limit. A proposal that is
// wrong is never an error: it is a rejection.
//
// Gates are registered on an instance, not a global: Builtin returns a new Registry holding the
// built-in gates, Registry.Define adds one, and Registry.Register runs the named gates of the
// registry on a runtime app (like the endpoints of a nats.go micro Service). Spec.New takes the
// start's context.
//
// Adding a gate: write <name>.go with the gate, its name and its Spec (constructor, KV buckets,
// extra consumers, what it publishes), add the Spec to builtin in registry.go (or Define it on
// the registry a program runs, from outside this package), and give the gate its place in
// events/route/routes.yaml (route.Known, the names the other services read, is derived from
// it). NATS users and permissions, signing keys and the dev stack derive from the registry.
package gates

import (
	"context"
	"fmt"
	"strings"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/slip"
	"github.com/worldgate/worldgate/shared/attest"
)

// Gate checks proposals.
type Gate interface {
	Name() string
	Check(ctx context.Context, p *events.Proposal) (Decision, error)
}

// RawGate is a gate that wants the message as it arrived, before strict decoding (the schema
// gate: it turns a decodable but invalid proposal into a rejection). The runtime calls CheckRaw
// instead of Check; p is decoded leniently, or strictly already (events.Decoder.Proposal) when
// data is nil.
type RawGate interface {
	Gate
	CheckRaw(ctx context.Context, data []byte, p *events.Proposal) (Decision, error)
}

// Holder is a gate that can hold a proposal (the approval gate). The runtime calls Hold with the
// proposal after recording the held hop; the input is acknowledged only after Hold succeeds.
type Holder interface {
	Hold(ctx context.Context, p *events.Proposal) error
}

// Forgetter is a gate that remembers what it passed (the invariant gate: each player's last
// move; the dedup gate: the fingerprints of accepted content). When a later gate of the same
// run (fusion) refuses the proposal for good, the chain calls RefusedLater, so that the memory
// does not outlive what was passed; an error (the memory could not be updated) fails the run,
// which is redelivered and decided again. A transient refusal is not reported: the proposal
// comes back to the gate that refused it and may still commit.
type Forgetter interface {
	RefusedLater(ctx context.Context, p *events.Proposal) error
}

// TrailRecorder is a gate that keeps the trail it is given (the audit gate, in its record):
// every hop before it is signed when it decides, where a run of gates sharing a key would
// otherwise leave them for the one signature after it (chain_sign.go), so that its record can
// be checked against the public keys alone.
type TrailRecorder interface {
	RecordsTrail()
}

// Outcome of a check.
type Outcome int

// Outcomes.
const (
	Passed Outcome = iota
	Rejected
	Held
	// Settled: the proposal was decided already, further on (its domain event is applied or
	// refused at commit), and has come back (a redelivery, a copy): it is acknowledged without
	// being forwarded, refused or recorded, and the proposals behind it go on.
	Settled
)

func (o Outcome) String() string {
	switch o {
	case Passed:
		return events.OutcomePassed
	case Rejected:
		return events.OutcomeRejected
	case Held:
		return events.OutcomeHeld
	case Settled:
		return "settled"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Decision is a gate's answer about one proposal.
type Decision struct {
	Outcome Outcome
	slip.Verdict
}

// Pass lets the proposal go on.
func Pass() Decision { return Decision{Outcome: Passed} }

// Hold keeps the proposal until someone decides.
func Hold() Decision { return Decision{Outcome: Held} }

// Settle acknowledges a proposal that was decided already further on; reason says how the gate
// knows (logged).
func Settle(reason string) Decision {
	return Decision{Outcome: Settled, Verdict: slip.Verdict{Reason: reason}}
}

// Reject refuses the proposal with code and a reason a person understands.
func Reject(code events.Code, reason string, details map[string]any) Decision {
	return Decision{Outcome: Rejected, Verdict: slip.Verdict{Code: code, Reason: reason, Details: details}}
}

// RejectTransient refuses the proposal for now: it may pass if proposed again after retryAfter
// seconds.
func RejectTransient(code events.Code, reason string, details map[string]any, retryAfter float64) Decision {
	d := Reject(code, reason, details)
	d.Transient, d.RetryAfter = true, retryAfter
	return d
}

type deliveryKey struct{}

type delivery struct{ n, max int }

// Delivery reports which delivery of the message a Check runs on (1 = first) and the limit
// after which the message is dead-lettered; a gate whose failure must become a rejection rather
// than a dead letter (audit) uses it to decide on the last delivery.
func Delivery(ctx context.Context) (n, limit int) {
	d, _ := ctx.Value(deliveryKey{}).(delivery)
	return d.n, d.max
}

func withDelivery(ctx context.Context, n, limit int) context.Context {
	return context.WithValue(ctx, deliveryKey{}, delivery{n, limit})
}

type digestKey struct{}

// runDigest is the content digest of the proposal a run decides, computed at most once.
type runDigest struct {
	p *events.Proposal
	d *string
}

// ContentDigest is the attested digest of the proposal a Check decides (attest.Digest: its
// content without the route, which no gate changes): computed once per run, and shared with
// the signatures of the run's gates.
func ContentDigest(ctx context.Context, p *events.Proposal) (string, error) {
	r, ok := ctx.Value(digestKey{}).(runDigest)
	if !ok || r.p != p {
		return attest.Digest(p)
	}
	if *r.d == "" {
		d, err := attest.Digest(p)
		if err != nil {
			return "", err
		}
		*r.d = d
	}
	return *r.d, nil
}

func withDigest(ctx context.Context, p *events.Proposal, d *string) context.Context {
	return context.WithValue(ctx, digestKey{}, runDigest{p, d})
}

// listOf joins items as "a, b and c".
func listOf(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
