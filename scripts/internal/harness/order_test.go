package harness

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCheckOrder(t *testing.T) {
	c := func(actor, cause string, seq uint64) Decision {
		return Decision{Actor: actor, Cause: cause, CauseSeq: seq}
	}
	r := func(actor, cause string, seq uint64) Decision {
		return Decision{Actor: actor, Cause: cause, CauseSeq: seq, Refused: true}
	}
	for _, tc := range []struct {
		name       string
		commits    []Decision
		violations int
		example    string // a substring of the first example
	}{
		{name: "nothing committed"},
		{name: "in order", commits: []Decision{c("p:1", "e1", 1), c("p:1", "e2", 5), c("p:1", "e3", 9)}},
		{name: "one actor's two moves swapped", commits: []Decision{c("p:1", "e2", 5), c("p:1", "e1", 1)}, violations: 1,
			example: "p:1: e1 (WORLD seq 1) committed after e2 (WORLD seq 5) was committed"},
		{name: "the first move overtaken by two", commits: []Decision{c("p:1", "e2", 5), c("p:1", "e3", 9), c("p:1", "e1", 1)}, violations: 1,
			example: "e1 (WORLD seq 1) committed after e3 (WORLD seq 9) was committed"},
		{name: "the last move first", commits: []Decision{c("p:1", "e3", 9), c("p:1", "e1", 1), c("p:1", "e2", 5)}, violations: 2},
		{name: "actors interleaved, each in order",
			commits: []Decision{c("p:2", "f1", 2), c("p:1", "e1", 1), c("p:1", "e2", 3), c("p:2", "f2", 4), c("p:3", "g1", 6), c("p:1", "e3", 5)}},
		{name: "actors interleaved, one out of order",
			commits:    []Decision{c("p:2", "f1", 2), c("p:1", "e2", 3), c("p:2", "f2", 4), c("p:1", "e1", 1), c("p:3", "g1", 6)},
			violations: 1, example: "p:1: e1"},
		{name: "events rejected in between leave gaps", commits: []Decision{c("p:1", "e1", 1), c("p:1", "e4", 12), c("p:1", "e7", 30)}},
		{name: "a duplicate commit of an earlier cause is the audit's, not an order violation",
			commits: []Decision{c("p:1", "e1", 1), c("p:1", "e2", 5), c("p:1", "e1", 1)}},
		{name: "several events of one cause", commits: []Decision{c("p:1", "e1", 1), c("p:1", "e1", 1), c("p:1", "e2", 5)}},
		{name: "a stale move refused at the commit after the move before it committed", commits: []Decision{c("p:1", "e1", 1), r("p:1", "e2", 5)}},
		{name: "a move refused at the commit after the next one overtook it", commits: []Decision{c("p:1", "e2", 5), r("p:1", "e1", 1)}, violations: 1,
			example: "p:1: e1 (WORLD seq 1) refused at the commit after e2 (WORLD seq 5) was committed"},
		{name: "refusals in order between commits", commits: []Decision{r("p:1", "e1", 1), c("p:1", "e2", 5), r("p:1", "e3", 9), c("p:1", "e4", 12)}},
		{name: "unknown causes are not checked", commits: []Decision{c("p:1", "e2", 5), c("p:1", "e1", 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckOrder(tc.commits, 3)
			if got.Violations != tc.violations {
				t.Errorf("%d violations (%v), want %d", got.Violations, got.Examples, tc.violations)
			}
			if len(got.Examples) != min(tc.violations, 3) {
				t.Errorf("%d examples (%v) for %d violations, want up to 3", len(got.Examples), got.Examples, tc.violations)
			}
			if tc.example != "" && (len(got.Examples) == 0 || !strings.Contains(got.Examples[0], tc.example)) {
				t.Errorf("examples %q, want the first to say %q", got.Examples, tc.example)
			}
		})
	}
	many := make([]Decision, 0, 10)
	for i := range 10 {
		many = append(many, c("p:1", "e"+string(rune('a'+i)), uint64(100-i)))
	}
	if got := CheckOrder(many, 3); got.Violations != 9 || len(got.Examples) != 3 {
		t.Errorf("ten moves in reverse: %d violations, %d examples; want 9 and 3 (the examples capped)", got.Violations, len(got.Examples))
	}
}

// Commits and refusals interleave by the time each was stored, each stream keeping its order.
func TestMergeDecisions(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := func(cause string, ms int, refused bool) Decision {
		return Decision{Cause: cause, At: t0.Add(time.Duration(ms) * time.Millisecond), Refused: refused}
	}
	commits := []Decision{at("c1", 1, false), at("c2", 5, false), at("c3", 4, false), at("c4", 9, false)} // c3's clock stepped back
	refusals := []Decision{at("r1", 0, true), at("r2", 5, true), at("r3", 7, true), at("r4", 20, true)}
	var got []string
	for _, d := range MergeDecisions(commits, refusals) {
		got = append(got, d.Cause)
	}
	if want := []string{"r1", "c1", "c2", "c3", "r2", "r3", "c4", "r4"}; !slices.Equal(got, want) {
		t.Errorf("merged %v, want %v", got, want)
	}
	if got := MergeDecisions(nil, refusals[:1]); len(got) != 1 || got[0].Cause != "r1" {
		t.Errorf("refusals only: %v", got)
	}
}
