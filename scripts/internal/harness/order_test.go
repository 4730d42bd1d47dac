package harness

import (
	"strings"
	"testing"
)

func TestCheckOrder(t *testing.T) {
	c := func(actor, cause string, seq uint64) Commit { return Commit{Actor: actor, Cause: cause, CauseSeq: seq} }
	for _, tc := range []struct {
		name       string
		commits    []Commit
		violations int
		example    string // a substring of the first example
	}{
		{name: "nothing committed"},
		{name: "in order", commits: []Commit{c("p:1", "e1", 1), c("p:1", "e2", 5), c("p:1", "e3", 9)}},
		{name: "one actor's two moves swapped", commits: []Commit{c("p:1", "e2", 5), c("p:1", "e1", 1)}, violations: 1,
			example: "p:1: e1 (WORLD seq 1) committed after e2 (WORLD seq 5)"},
		{name: "the first move overtaken by two", commits: []Commit{c("p:1", "e2", 5), c("p:1", "e3", 9), c("p:1", "e1", 1)}, violations: 1,
			example: "e1 (WORLD seq 1) committed after e3 (WORLD seq 9)"},
		{name: "the last move first", commits: []Commit{c("p:1", "e3", 9), c("p:1", "e1", 1), c("p:1", "e2", 5)}, violations: 2},
		{name: "actors interleaved, each in order",
			commits: []Commit{c("p:2", "f1", 2), c("p:1", "e1", 1), c("p:1", "e2", 3), c("p:2", "f2", 4), c("p:3", "g1", 6), c("p:1", "e3", 5)}},
		{name: "actors interleaved, one out of order",
			commits:    []Commit{c("p:2", "f1", 2), c("p:1", "e2", 3), c("p:2", "f2", 4), c("p:1", "e1", 1), c("p:3", "g1", 6)},
			violations: 1, example: "p:1: e1"},
		{name: "events rejected in between leave gaps", commits: []Commit{c("p:1", "e1", 1), c("p:1", "e4", 12), c("p:1", "e7", 30)}},
		{name: "a duplicate commit of an earlier cause is the audit's, not an order violation",
			commits: []Commit{c("p:1", "e1", 1), c("p:1", "e2", 5), c("p:1", "e1", 1)}},
		{name: "several events of one cause", commits: []Commit{c("p:1", "e1", 1), c("p:1", "e1", 1), c("p:1", "e2", 5)}},
		{name: "unknown causes are not checked", commits: []Commit{c("p:1", "e2", 5), c("p:1", "e1", 0)}},
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
	many := make([]Commit, 0, 10)
	for i := range 10 {
		many = append(many, c("p:1", "e"+string(rune('a'+i)), uint64(100-i)))
	}
	if got := CheckOrder(many, 3); got.Violations != 9 || len(got.Examples) != 3 {
		t.Errorf("ten moves in reverse: %d violations, %d examples; want 9 and 3 (the examples capped)", got.Violations, len(got.Examples))
	}
}
