package evalset_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/services/worldgate/evalset"
)

// TestSetIsWellFormed: the set loads (every payload decodes strictly for its kind, the world
// parses), every gate and each of its categories has cases in both halves, and each half holds
// enough cases per gate to grade it.
func TestSetIsWellFormed(t *testing.T) {
	s, err := evalset.Load()
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ gate, category string }
	per := map[evalset.Half]map[key]int{}
	gates := map[evalset.Half]map[string]int{}
	for _, h := range []evalset.Half{evalset.Tuning, evalset.HeldOutHalf} {
		per[h], gates[h] = map[key]int{}, map[string]int{}
		for _, c := range s.Of(h) {
			per[h][key{c.Gate, c.Category}]++
			gates[h][c.Gate]++
		}
	}
	for k := range per[evalset.Tuning] {
		if per[evalset.HeldOutHalf][k] == 0 {
			t.Errorf("%s/%s has no held-out case", k.gate, k.category)
		}
	}
	for k := range per[evalset.HeldOutHalf] {
		if per[evalset.Tuning][k] == 0 {
			t.Errorf("%s/%s has no tuning case", k.gate, k.category)
		}
	}
	for _, g := range []string{evalset.GateInvariant, evalset.GateDedup, evalset.GateSafety} {
		for _, h := range []evalset.Half{evalset.Tuning, evalset.HeldOutHalf} {
			if gates[h][g] < 80 {
				t.Errorf("%s half: %d %s cases, want at least 80", h, gates[h][g], g)
			}
		}
	}
	t.Logf("%d cases: tuning %v, held-out %v", len(s.Cases), gates[evalset.Tuning], gates[evalset.HeldOutHalf])
}

// TestGatesMeetTheBar runs the invariant, dedup and safety gates (built from the registry, on
// graphd holding the evaluation world, embedded NATS and mcp-classify over MCP) on every case
// and fails below the bar on either half. A rejection the evaluation cannot attribute to a rule
// fails it too.
func TestGatesMeetTheBar(t *testing.T) {
	s, err := evalset.Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	vs, err := evalset.Run(ctx, s, evalset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(s.Cases) {
		t.Fatalf("%d verdicts for %d cases", len(vs), len(s.Cases))
	}
	scores := evalset.Score(vs)
	var b strings.Builder
	if err := evalset.Print(&b, scores); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	for _, h := range scores {
		if len(h.Gates) != 3 {
			t.Errorf("%s half grades %d gates, want 3", h.Half, len(h.Gates))
		}
	}
	for _, e := range evalset.BelowBar(scores) {
		t.Error(e)
	}
	for _, v := range vs {
		if slices.Contains(v.For, evalset.Unrecognised) {
			t.Errorf("%s: the %s gate's rejection names no rule the evaluation knows: %s", v.ID, v.Gate, v.Reason)
		}
	}
}
