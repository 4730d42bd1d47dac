package server_test

import (
	"strings"
	"testing"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
)

// TestSeedStrategy checks SeedStrategy: coin()/sample() draw TinkerPop's
// java.util.Random sequence (the same answer every time, TinkerGraph's for
// seed 999999), and the places where graphd cannot promise TinkerPop's
// order of draws are refused; sample(local) samples a map's entries.
func TestSeedStrategy(t *testing.T) {
	g := modern(t)
	seeded := g.WithStrategies(gremlingo.SeedStrategy(gremlingo.SeedStrategyConfig{Seed: 999999}))
	for i := 0; i < 2; i++ {
		if got := strings.Join(norms(toList(t, seeded.V().Order().By("name").Coin(0.5).Values("name")), true), " "); got != "josh" {
			t.Errorf("seeded coin: %q", got)
		}
		if got := strings.Join(norms(toList(t, seeded.V().Values("name").Order().Fold().Sample(gremlingo.Scope.Local, 3)), true), " "); got != "[vadas,marko,ripple]" {
			t.Errorf("seeded sample(local): %q", got)
		}
	}
	for _, c := range []struct {
		tr   GT
		want string
	}{
		{seeded.V().Repeat(__.Out().Coin(0.5)).Times(2), "inside repeat()"},
		{seeded.V().Union(__.Out(), __.In()).Coin(0.5), "after a step other than"},
		{seeded.V().Out().Coin(0.5), "over equal traversers"},
	} {
		_, err := c.tr.ToList()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v should say %q", err, c.want)
		}
	}
	got := toList(t, g.V(1).ValueMap().Sample(gremlingo.Scope.Local, 1))
	if m, ok := got[0].(map[any]any); !ok || len(m) != 1 {
		t.Errorf("sample(local, 1) of a map: %s", norm(got[0]))
	}
}
