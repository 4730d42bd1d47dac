package evalset_test

import (
	"testing"

	"github.com/worldgate/worldgate/services/worldgate/evalset"
)

// TestFreshSet runs the invariant, dedup and safety gates on the frozen fresh set (issue #41
// item 5) and fails when a gate does worse than it did when the set was frozen: a floor, not
// a bar. The gates were never tuned on this set; raise a floor when a rule change (tuned on the
// older set's tuning half) improves it, never lower one to let a change through.
func TestFreshSet(t *testing.T) {
	s, err := evalset.LoadFresh()
	if err != nil {
		t.Fatal(err)
	}
	vs := runSet(t, s)
	score := evalset.ScoreFresh(vs)
	logScores(t, []evalset.HalfScore{score})
	for _, v := range vs {
		if !v.Right() {
			t.Logf("miss %s (%s/%s, want %s): %s %v %s", v.ID, v.Gate, v.Case.Category, v.Case.Expect, v.Outcome, v.For, v.Reason)
		}
	}
	gates := map[string]evalset.GateScore{}
	for _, g := range score.Gates {
		gates[g.Gate] = g
	}
	for gate, f := range freshFloors {
		g, ok := gates[gate]
		if !ok {
			t.Errorf("the %s gate was not graded", gate)
			continue
		}
		if g.Precision < f.precision || g.Recall < f.recall {
			t.Errorf("%s gate on the fresh set: precision %.3f recall %.3f, below the floor %.3f / %.3f", gate, g.Precision, g.Recall, f.precision, f.recall)
		}
		for _, c := range g.Categories {
			if min, ok := f.right[c.Category]; ok && c.Right < min {
				t.Errorf("%s/%s on the fresh set: %d of %d right, below the floor of %d", gate, c.Category, c.Right, c.Cases, min)
			}
		}
	}
}

// freshFloors are what the gates measured on the fresh set when it was frozen (2026-11-27,
// moderation policy worldgate-moderation-3.0.0; README.md has the table).
var freshFloors = map[string]struct {
	precision, recall float64
	right             map[string]int // per category: cases decided right
}{
	evalset.GateInvariant: {1.000, 1.000, map[string]int{"valid": 29, "missing_entity": 13, "unknown_faction": 5, "duplicate_exit": 5,
		"self_loop": 4, "npc_not_there": 6, "already_exists": 7, "no_such_exit": 6, "player_not_there": 4}},
	evalset.GateDedup: {1.000, 0.958, map[string]int{"near_duplicate": 23, "variation": 10, "restated": 8, "other_scope": 8,
		"expired": 5, "other_language": 5}},
	evalset.GateSafety: {0.981, 0.843, map[string]int{"benign": 39, "harassment": 6, "threat": 7, "hate": 5, "sexual": 3,
		"self_harm": 5, "violence_extreme": 1, "pii": 9, "prompt_injection": 10, "markup_injection": 8}},
}
