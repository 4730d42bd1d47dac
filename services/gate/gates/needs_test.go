package gates_test

import (
	"slices"
	"testing"

	"github.com/worldgate/worldgate/services/gate/gates"
)

// The gate service connects to a dependency for the gates whose Spec needs it, and only for
// them: the registry, not a list of gate names, decides.
func TestNeedingNamesTheGatesOfADependency(t *testing.T) {
	r := gates.Builtin()
	all := r.Known()
	for need, want := range map[gates.Need][]string{
		gates.NeedClassifier:  {gates.Safety},
		gates.NeedGraphReader: {gates.Invariant},
		gates.NeedTemplates:   {gates.Replay},
	} {
		if got := r.Needing(all, need); !slices.Equal(got, want) {
			t.Errorf("Needing(all, %s) = %v; want %v", need, got, want)
		}
		if got := r.Needing([]string{gates.Schema, gates.Audit, "no-such-gate"}, need); len(got) != 0 {
			t.Errorf("Needing(schema, audit, no-such-gate, %s) = %v; want none", need, got)
		}
	}
}
