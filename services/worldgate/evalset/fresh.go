package evalset

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"

	"github.com/worldgate/worldgate/services/worldgate/worldfile"
)

// The fresh set (issue #41 item 5): fresh.jsonl, written from LABELLING.md and world.yaml
// alone — not from proposals.jsonl, the moderation sets or the gates' rules — after the gates
// were tuned on the older set. It is frozen: FreshSHA256 is its hash, LoadFresh refuses any
// other content, and it was committed in a commit that changed no rule. No rule is ever tuned
// on it, so all of it is held out; it is reported apart from the older set (ScoreFresh).
//
//go:embed fresh.jsonl
var fresh []byte

// FreshSHA256 is the SHA-256 of fresh.jsonl as frozen. A labelling mistake found later is
// fixed in a new set, not here: changing a line changes what was measured.
const FreshSHA256 = "8233efcbbb7760f08517ea4116900da336aa1d6fdf5dd26d6a871ebd9e1b8198"

// FreshHalf names the fresh set in its scores.
const FreshHalf = "fresh"

// LoadFresh reads the frozen fresh set and the evaluation world, checking every case as Load
// does; every case is held out.
func LoadFresh() (*Set, error) {
	sum := sha256.Sum256(fresh)
	if got := hex.EncodeToString(sum[:]); got != FreshSHA256 {
		return nil, fmt.Errorf("fresh.jsonl has SHA-256 %s, not the frozen %s: the fresh set is frozen (write a new set from LABELLING.md instead of editing it)", got, FreshSHA256)
	}
	w, err := worldfile.Parse("world.yaml", world)
	if err != nil {
		return nil, fmt.Errorf("evaluation world: %w", err)
	}
	s := &Set{World: w}
	if s.Cases, err = readCases("fresh.jsonl", fresh, func(string) bool { return true }); err != nil {
		return nil, err
	}
	return s, s.check()
}

// ScoreFresh grades verdicts on the fresh set per gate and category, as one half named
// FreshHalf (Print writes it as Score's halves).
func ScoreFresh(vs []Verdict) HalfScore {
	hs := HalfScore{Half: FreshHalf, Cases: len(vs)}
	byGate := map[string][]Verdict{}
	for _, v := range vs {
		byGate[v.Gate] = append(byGate[v.Gate], v)
	}
	for _, g := range []string{GateInvariant, GateDedup, GateSafety} {
		if len(byGate[g]) > 0 {
			hs.Gates = append(hs.Gates, scoreGate(g, byGate[g]))
		}
	}
	return hs
}
