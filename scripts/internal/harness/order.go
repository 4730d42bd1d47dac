package harness

import (
	"fmt"
	"time"
)

// Decision is one decision of the writer (the event-processor) as the order check sees it: an
// event committed, or a proposal refused at the commit, with the actor whose world event caused
// it, the correlation id of that cause, and the cause's sequence on the WORLD stream (the order
// in which the game published it).
type Decision struct {
	Actor    string // "kind:id" of the causing world event
	Cause    string // correlation id of the causing world event
	CauseSeq uint64 // its WORLD stream sequence; 0 if unknown (not checked)
	// Refused is a refusal at the commit (the event-processor's rejection), not a commit. A
	// player's moves are compare-and-set on where the player stands, so a move that overtakes
	// the one before it commits and makes the earlier one refused: the reordering shows as a
	// refusal decided after a later cause's commit, never as two commits out of order.
	Refused bool
	At      time.Time // when it was stored (its stream's timestamp), to merge commits and refusals
}

// OrderCheck is the per-actor order check of a run's decisions.
type OrderCheck struct {
	Violations int      // decisions whose cause was published before the cause of an earlier decision of the same actor
	Examples   []string // up to max, for a person to trace
}

// CheckOrder checks that each actor's decisions at the writer, in the order given (COMMITTED
// stream order, with the refusals at the commit merged in by time: MergeDecisions), follow the
// order of the world events that caused them (CauseSeq). A decision whose cause precedes the
// cause of a decision of the same actor already seen is one violation: one actor's second move
// applied before its first. Events rejected by a gate before the commit leave no decision and do
// not count; a cause decided again (a duplicate, which the exactly-once audit counts) or a
// further event of a cause already seen is not a violation; neither is a decision whose cause
// is unknown (CauseSeq 0). At most maxExamples examples are kept.
func CheckOrder(decisions []Decision, maxExamples int) OrderCheck {
	var out OrderCheck
	latest := map[string]Decision{}      // actor → the decision with the latest cause so far
	seen := map[string]map[string]bool{} // actor → causes decided so far
	for _, d := range decisions {
		if d.CauseSeq == 0 {
			continue
		}
		if seen[d.Actor] == nil {
			seen[d.Actor] = map[string]bool{}
		}
		if seen[d.Actor][d.Cause] {
			continue
		}
		seen[d.Actor][d.Cause] = true
		l, ok := latest[d.Actor]
		if ok && d.CauseSeq < l.CauseSeq {
			out.Violations++
			if len(out.Examples) < maxExamples {
				out.Examples = append(out.Examples, fmt.Sprintf("%s: %s (WORLD seq %d) %s after %s (WORLD seq %d) was %s",
					d.Actor, d.Cause, d.CauseSeq, verb(d), l.Cause, l.CauseSeq, verb(l)))
			}
			continue
		}
		latest[d.Actor] = d
	}
	return out
}

func verb(d Decision) string {
	if d.Refused {
		return "refused at the commit"
	}
	return "committed"
}

// MergeDecisions merges the commits (in COMMITTED order) and the refusals at the commit (in
// PROPOSALS order) by the time each was stored, keeping each stream's own order: the writer
// publishes a decision before it takes the next message of the actor, so with the order kept
// an actor's decisions are stored one after the other.
func MergeDecisions(commits, refusals []Decision) []Decision {
	out := make([]Decision, 0, len(commits)+len(refusals))
	i, j := 0, 0
	for i < len(commits) && j < len(refusals) {
		if refusals[j].At.Before(commits[i].At) {
			out = append(out, refusals[j])
			j++
		} else {
			out = append(out, commits[i])
			i++
		}
	}
	out = append(out, commits[i:]...)
	return append(out, refusals[j:]...)
}
