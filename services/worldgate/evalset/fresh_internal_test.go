package evalset

import (
	"strings"
	"testing"
)

// The fresh set is frozen: a byte changed in fresh.jsonl (a label "fixed" after seeing the
// gates' misses, say) is refused, not measured.
func TestFreshSetIsFrozen(t *testing.T) {
	if _, err := LoadFresh(); err != nil {
		t.Fatal(err)
	}
	frozen := fresh
	defer func() { fresh = frozen }()
	relabelled := strings.Replace(string(frozen), `"expect": "rejected"`, `"expect": "passed"`, 1)
	if relabelled == string(frozen) {
		t.Fatal("no rejected case to relabel")
	}
	fresh = []byte(relabelled)
	if _, err := LoadFresh(); err == nil || !strings.Contains(err.Error(), "frozen") {
		t.Fatalf("a relabelled fresh set loaded (%v)", err)
	}
}
