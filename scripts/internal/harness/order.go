package harness

import "fmt"

// Commit is one committed event as the order check sees it: the actor whose event caused it,
// the correlation id of that cause, and the cause's sequence on the WORLD stream (the order in
// which the game published it).
type Commit struct {
	Actor    string // "kind:id" of the causing world event
	Cause    string // correlation id of the causing world event
	CauseSeq uint64 // its WORLD stream sequence; 0 if unknown (not checked)
}

// OrderCheck is the per-actor order check of a run's commits.
type OrderCheck struct {
	Violations int      // commits whose cause was published before the cause of an earlier commit of the same actor
	Examples   []string // up to max, for a person to trace
}

// CheckOrder checks that each actor's committed events, in the order given (COMMITTED stream
// order), follow the order of the world events that caused them (CauseSeq). A commit whose cause
// precedes the cause of a commit of the same actor already seen is one violation: one actor's
// second move applied before its first. Events rejected in between leave no commit and do not
// count; a cause committed again (a duplicate, which the exactly-once audit counts) or a
// further event of a cause already seen is not a violation; neither is a commit whose cause is
// unknown (CauseSeq 0). At most maxExamples examples are kept.
func CheckOrder(commits []Commit, maxExamples int) OrderCheck {
	var out OrderCheck
	type last struct {
		cause string
		seq   uint64
	}
	latest := map[string]last{}          // actor → the commit with the latest cause so far
	seen := map[string]map[string]bool{} // actor → causes committed so far
	for _, c := range commits {
		if c.CauseSeq == 0 {
			continue
		}
		if seen[c.Actor] == nil {
			seen[c.Actor] = map[string]bool{}
		}
		if seen[c.Actor][c.Cause] {
			continue
		}
		seen[c.Actor][c.Cause] = true
		l, ok := latest[c.Actor]
		if ok && c.CauseSeq < l.seq {
			out.Violations++
			if len(out.Examples) < maxExamples {
				out.Examples = append(out.Examples, fmt.Sprintf("%s: %s (WORLD seq %d) committed after %s (WORLD seq %d)",
					c.Actor, c.Cause, c.CauseSeq, l.cause, l.seq))
			}
			continue
		}
		latest[c.Actor] = last{cause: c.Cause, seq: c.CauseSeq}
	}
	return out
}
