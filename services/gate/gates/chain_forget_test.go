package gates

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
)

// remembering is a gate that remembers what it passed (a Forgetter), and records what it was
// told to forget.
type remembering struct {
	name   string
	forgot []string
	err    error
}

func (g *remembering) Name() string { return g.name }
func (g *remembering) Check(context.Context, *events.Proposal) (Decision, error) {
	return Pass(), nil
}
func (g *remembering) RefusedLater(_ context.Context, p *events.Proposal) error {
	g.forgot = append(g.forgot, p.ProposalID)
	return g.err
}

// A run's gates that remember what they passed forget a proposal a later gate of the run
// refused for good, and only then: a transient refusal brings the proposal back.
func TestForgetRefusedOnlyForAFinalRefusal(t *testing.T) {
	p := &events.Proposal{ProposalID: "p1"}
	rate := &remembering{name: Rate}
	refusal := func(transient bool) step {
		d := Reject(events.CodeRateLimited, "Too many.", nil)
		d.Transient = transient
		return step{gate: rate, d: d}
	}
	dedup, plain := &remembering{name: Dedup}, quietGate{}
	passed := []Gate{plain, dedup}

	if err := forgetRefused(context.Background(), passed, refusal(true), p); err != nil || len(dedup.forgot) != 0 {
		t.Fatalf("transient refusal: forgot %v, err %v; want nothing forgotten", dedup.forgot, err)
	}
	if err := forgetRefused(context.Background(), passed, step{gate: rate, d: Pass()}, p); err != nil || len(dedup.forgot) != 0 {
		t.Fatalf("pass: forgot %v, err %v; want nothing forgotten", dedup.forgot, err)
	}
	if err := forgetRefused(context.Background(), passed, refusal(false), p); err != nil || !slices.Equal(dedup.forgot, []string{"p1"}) {
		t.Fatalf("final refusal: forgot %v, err %v; want p1 forgotten", dedup.forgot, err)
	}
	dedup.err = errors.New("bucket unreachable")
	if err := forgetRefused(context.Background(), passed, refusal(false), p); err == nil ||
		!strings.Contains(err.Error(), "gate dedup: forget proposal p1, refused by the rate gate") {
		t.Fatalf("a failed forget: %v; want an error naming the gate, the proposal and the refusing gate", err)
	}
}

// quietGate passes everything and remembers nothing.
type quietGate struct{}

func (quietGate) Name() string { return Schema }
func (quietGate) Check(context.Context, *events.Proposal) (Decision, error) {
	return Pass(), nil
}
