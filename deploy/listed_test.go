package deploy

import (
	"slices"
	"testing"
)

// The names a flag's usage lists may carry dashes and digits: a gate named night-curfew is
// deployed like the others (docs/extending.md).
func TestListedNamesMayHaveDashes(t *testing.T) {
	for usage, want := range map[string][]string{
		"gates to run: comma-separated names (schema,night-curfew,audit) or all":       {"schema", "night-curfew", "audit"},
		"comma-separated roles to run (ambience,npc-dialogue,world-rules); empty: all": {"ambience", "npc-dialogue", "world-rules"},
	} {
		m := listed.FindStringSubmatch(usage)
		if m == nil || !slices.Equal(splitNames(m[1]), want) {
			t.Errorf("%q: read %v, want %v", usage, m, want)
		}
	}
}
