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
	vs := runSet(t, s)
	scores := evalset.Score(vs)
	logScores(t, scores)
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

// runSet runs the gates on every case of s and returns one verdict per case.
func runSet(t *testing.T, s *evalset.Set) []evalset.Verdict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	vs, err := evalset.Run(ctx, s, evalset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(s.Cases) {
		t.Fatalf("%d verdicts for %d cases", len(vs), len(s.Cases))
	}
	return vs
}

// logScores logs the scores as worldgate eval prints them.
func logScores(t *testing.T, scores []evalset.HalfScore) {
	t.Helper()
	var b strings.Builder
	if err := evalset.Print(&b, scores); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
}

// TestSafetyScoredPerSetLanguageAndCategory: the safety gate's verdicts are graded per moderation
// set, and the outside-style set's per language and per category; a harmful line refused for
// another category is not caught, a benign one refused costs precision and pass rate.
func TestSafetyScoredPerSetLanguageAndCategory(t *testing.T) {
	c := func(id, source, lang, category string, heldOut bool) evalset.Case {
		k := evalset.Case{ID: id, Gate: evalset.GateSafety, Category: category, Accept: []string{category}, Expect: evalset.Rejected,
			Source: source, Lang: lang, HeldOut: heldOut}
		if category == "benign" {
			k.Expect, k.Accept = evalset.Passed, nil
		}
		return k
	}
	v := func(k evalset.Case, outcome string, for_ ...string) evalset.Verdict {
		return evalset.Verdict{Case: k, ID: k.ID, Gate: k.Gate, Outcome: outcome, For: for_}
	}
	vs := []evalset.Verdict{
		v(c("m1", evalset.SetLabelled, "", "threat", false), evalset.Rejected, "threat"),
		v(c("o1", evalset.SetOutside, "de", "threat", false), evalset.Rejected, "threat"),
		v(c("o2", evalset.SetOutside, "de", "threat", false), evalset.Passed),
		v(c("o3", evalset.SetOutside, "de", "benign", false), evalset.Rejected, "hate"),
		v(c("o4", evalset.SetOutside, "en", "self_harm", false), evalset.Rejected, "hate"), // wrong category: not caught
		v(c("o5", evalset.SetOutside, "en", "benign", false), evalset.Passed),
		v(c("h1", evalset.SetOutside, "fr", "hate", true), evalset.Rejected, "hate"),
	}
	scores := evalset.Score(vs)
	got := map[string]evalset.GroupScore{}
	for _, g := range scores[0].Gates[0].Groups {
		got[g.Group] = g
	}
	val := func(p *float64) float64 {
		if p == nil {
			return -1
		}
		return *p
	}
	for _, w := range []struct {
		group                       string
		cases, caught, rejected     int
		recall, precision, passRate float64
	}{
		{"labelled", 1, 1, 1, 1, 1, -1},
		{"outside", 5, 1, 3, 1.0 / 3, 2.0 / 3, 0.5},
		{"outside lang=de", 3, 1, 2, 0.5, 0.5, 0},
		{"outside lang=en", 2, 0, 1, 0, 1, 1},
		{"outside threat", 2, 1, 1, 0.5, 1, -1},
		{"outside benign", 2, 0, 1, -1, 0, 0.5},
	} {
		g, ok := got[w.group]
		if !ok {
			t.Errorf("no group %q in %v", w.group, scores[0].Gates[0].Groups)
			continue
		}
		if g.Cases != w.cases || g.Caught != w.caught || g.Rejected != w.rejected || val(g.Recall) != w.recall || g.Precision != w.precision || val(g.PassRate) != w.passRate {
			t.Errorf("%s: %+v (recall %v, pass rate %v), want %+v", w.group, g, val(g.Recall), val(g.PassRate), w)
		}
	}
	if _, ok := got["labelled lang="]; ok {
		t.Error("lines without a language are grouped under an empty one")
	}
	// The held-out half is graded on its own.
	if h := scores[1].Gates[0].Groups; len(h) != 3 || h[0].Group != "outside" || h[1].Group != "outside lang=fr" || h[2].Group != "outside hate" {
		t.Errorf("held-out groups: %+v", h)
	}
	var b strings.Builder
	if err := evalset.Print(&b, scores); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "[outside lang=de]") || !strings.Contains(b.String(), "[outside threat]") {
		t.Errorf("the table names no group:\n%s", b.String())
	}
}

// TestOutsideSetIsInTheEvaluation: the outside-style moderation set's lines are safety cases in
// its own halves (held-out lines only in the held-out half), each with its language, all six
// languages in both halves.
func TestOutsideSetIsInTheEvaluation(t *testing.T) {
	s, err := evalset.Load()
	if err != nil {
		t.Fatal(err)
	}
	langs := map[evalset.Half]map[string]int{evalset.Tuning: {}, evalset.HeldOutHalf: {}}
	for _, h := range []evalset.Half{evalset.Tuning, evalset.HeldOutHalf} {
		for _, c := range s.Of(h) {
			if c.Source != evalset.SetOutside {
				continue
			}
			if strings.HasPrefix(c.ID, "out-held-") != (h == evalset.HeldOutHalf) {
				t.Errorf("%s is in the %s half", c.ID, h)
			}
			langs[h][c.Lang]++
		}
	}
	for _, h := range []evalset.Half{evalset.Tuning, evalset.HeldOutHalf} {
		for _, l := range []string{"en", "fr", "es", "de", "pt", "it"} {
			if langs[h][l] == 0 {
				t.Errorf("%s half: no outside-style line in %s (%v)", h, l, langs[h])
			}
		}
		if len(langs[h]) != 6 {
			t.Errorf("%s half: languages %v", h, langs[h])
		}
	}
}
