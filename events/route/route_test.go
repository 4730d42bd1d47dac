package route_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
)

func TestDefaultRoutes(t *testing.T) {
	r := route.Default()
	for _, c := range []struct {
		kind string
		want []string
	}{
		{events.KindAmbience, []string{"schema", "safety", "invariant", "dedup", "replay", "rate", "audit"}},
		{events.KindNPCDialogue, []string{"schema", "safety", "invariant", "dedup", "replay", "rate", "audit"}},
		{events.KindQuestSeed, []string{"schema", "safety", "invariant", "dedup", "replay", "rate", "audit"}},
		{events.KindPlayerMoved, []string{"schema", "invariant", "rate", "audit"}},
		{events.KindLocationCreated, []string{"schema", "safety", "invariant", "audit"}},
		{events.KindLoreFactAdded, []string{"schema", "safety", "invariant", "audit"}},
		{events.KindExitRemoved, []string{"schema", "invariant", "approval", "audit"}},
		{events.KindNPCRemoved, []string{"schema", "invariant", "approval", "audit"}},
	} {
		// The route holds these gates in this order; a gate added to the routes file between
		// them (docs/extending.md) is fine.
		got, err := r.For(c.kind)
		if err != nil || !inOrder(got, c.want) {
			t.Errorf("For(%s) = %v, %v; want %v in this order", c.kind, got, err, c.want)
		}
	}
	for _, k := range events.Kinds() {
		if _, err := r.For(k.Kind); err != nil {
			t.Errorf("kind %s: %v", k.Kind, err)
		}
	}
	got, _ := r.For(events.KindAmbience)
	got[0] = "mutated"
	if again, _ := r.For(events.KindAmbience); again[0] != "schema" {
		t.Fatal("For returned the shared slice")
	}
	if _, err := r.For("teleport"); err == nil || !strings.Contains(err.Error(), "teleport") {
		t.Fatalf("unknown kind: %v", err)
	}
}

// inOrder reports whether route holds every gate of want, in want's order, first and last
// included.
func inOrder(route, want []string) bool {
	if len(route) == 0 || len(want) == 0 || route[0] != want[0] || route[len(route)-1] != want[len(want)-1] {
		return false
	}
	i := 0
	for _, g := range route {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

func defaultWith(edit func(map[string]string)) string {
	lines := map[string]string{}
	for _, k := range events.Kinds() {
		lines[k.Kind] = "[schema, safety, invariant, audit]"
		if !route.PlayerText(k.Kind) {
			lines[k.Kind] = "[schema, invariant, audit]"
		}
		if k.Destructive {
			lines[k.Kind] = "[schema, invariant, approval, audit]"
		}
	}
	edit(lines)
	var b strings.Builder
	b.WriteString("routes:\n")
	for k, v := range lines {
		b.WriteString("  " + k + ": " + v + "\n")
	}
	return b.String()
}

func TestStartupValidationNamesTheProblem(t *testing.T) {
	for _, c := range []struct {
		name string
		doc  string
		want []string
	}{
		{"missing kind", defaultWith(func(m map[string]string) { delete(m, "quest_seed") }), []string{"quest_seed has no route"}},
		{"unknown gate", defaultWith(func(m map[string]string) { m["ambience"] = "[schema, vibes, audit]" }), []string{"ambience", `unknown gate "vibes"`}},
		{"duplicate gate", defaultWith(func(m map[string]string) { m["ambience"] = "[schema, safety, safety, audit]" }), []string{"ambience", "safety twice"}},
		{"no schema first", defaultWith(func(m map[string]string) { m["ambience"] = "[safety, schema, audit]" }), []string{"ambience", "must start with schema"}},
		{"no audit last", defaultWith(func(m map[string]string) { m["ambience"] = "[schema, safety]" }), []string{"ambience", "must end with audit"}},
		{"destructive without approval", defaultWith(func(m map[string]string) { m["npc_removed"] = "[schema, invariant, audit]" }), []string{"npc_removed is destructive"}},
		{"unknown kind", defaultWith(func(m map[string]string) { m["teleport"] = "[schema, audit]" }), []string{"unknown kind teleport"}},
		{"player text without safety", defaultWith(func(m map[string]string) { m["lore_fact_added"] = "[schema, invariant, audit]" }), []string{"lore_fact_added carries text that reaches players", "must include safety"}},
		{"unknown field", "routes: {}\nextra: 1\n", []string{"extra"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := route.Parse([]byte(c.doc), route.Known()...)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestLoadFileOverridesDefault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "routes.yaml")
	doc := defaultWith(func(m map[string]string) { m["ambience"] = "[schema, safety, audit]" })
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := route.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.For("ambience"); !slices.Equal(got, []string{"schema", "safety", "audit"}) {
		t.Fatalf("ambience route %v", got)
	}
	if _, err := route.Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("missing file accepted")
	}
	if r, err := route.Load(""); err != nil || !r.Uses("dedup") {
		t.Fatalf("Load(\"\") = %v", err)
	}
}
