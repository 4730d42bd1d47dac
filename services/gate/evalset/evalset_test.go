package evalset_test

import (
	"testing"

	"github.com/worldgate/worldgate/services/gate/evalset"
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
