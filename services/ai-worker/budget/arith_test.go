package budget

import (
	"strings"
	"testing"
	"time"
)

func TestReserveIsTheBudgetRule(t *testing.T) {
	l := Limit{Micros: 1000, Tokens: 100}
	for _, c := range []struct {
		name       string
		used, est  Usage
		lim        Limit
		degradeAt  float64
		degradable bool
		want       Usage
		verdict    Verdict
	}{
		{"fits", Usage{500, 50}, Usage{400, 40}, l, 0, false, Usage{900, 90}, Admitted},
		{"exactly the limit fits", Usage{500, 50}, Usage{500, 50}, l, 0, false, Usage{1000, 100}, Admitted},
		{"one micro-dollar over", Usage{500, 50}, Usage{501, 10}, l, 0, false, Usage{500, 50}, RefusedLimit},
		{"tokens over", Usage{0, 95}, Usage{1, 6}, l, 0, false, Usage{0, 95}, RefusedLimit},
		{"no token limit", Usage{0, 1e9}, Usage{1, 1e9}, Limit{Micros: 10}, 0, false, Usage{1, 2e9}, Admitted},
		{"above degrade_at, degradable", Usage{700, 0}, Usage{200, 0}, l, 0.8, true, Usage{700, 0}, RefusedLow},
		{"above degrade_at, cheapest tier", Usage{700, 0}, Usage{200, 0}, l, 0.8, false, Usage{900, 0}, Admitted},
		{"below degrade_at", Usage{500, 0}, Usage{200, 0}, l, 0.8, true, Usage{700, 0}, Admitted},
		{"degrade_at 1 is the limit", Usage{700, 0}, Usage{300, 0}, l, 1, true, Usage{1000, 0}, Admitted},
	} {
		got, v := Reserve(c.used, c.est, c.lim, c.degradeAt, c.degradable)
		if got != c.want || v != c.verdict {
			t.Errorf("%s: Reserve = %+v %s, want %+v %s", c.name, got, v, c.want, c.verdict)
		}
	}
}

func TestSettleAndRelease(t *testing.T) {
	for _, c := range []struct {
		name              string
		u, est, actual, w Usage
	}{
		{"cheaper than estimated", Usage{900, 90}, Usage{400, 40}, Usage{100, 12}, Usage{600, 62}},
		{"dearer than estimated", Usage{900, 90}, Usage{400, 40}, Usage{450, 41}, Usage{950, 91}},
		{"never below zero", Usage{100, 10}, Usage{400, 40}, Usage{0, 0}, Usage{0, 0}},
	} {
		if got := Settle(c.u, c.est, c.actual); got != c.w {
			t.Errorf("%s: Settle = %+v, want %+v", c.name, got, c.w)
		}
	}
	if got := Release(Usage{900, 90}, Usage{400, 40}); got != (Usage{500, 50}) {
		t.Errorf("Release = %+v", got)
	}
}

func TestEffectiveLimit(t *testing.T) {
	usd, tok := 2.5, int64(7)
	base := Limit{Micros: 1_000_000, Tokens: 100}
	for _, c := range []struct {
		name string
		o    *Override
		mult float64
		want Limit
	}{
		{"file", nil, 0, base},
		{"override usd", &Override{USD: &usd}, 0, Limit{2_500_000, 100}},
		{"override tokens", &Override{Tokens: &tok}, 1, Limit{1_000_000, 7}},
		{"repeat offender halves", nil, 0.5, Limit{500_000, 50}},
		{"multiplier never makes unlimited", nil, 1e-12, Limit{1, 1}},
		{"no limit stays none", nil, 0.5, Limit{0, 0}},
	} {
		in := base
		if c.name == "no limit stays none" {
			in = Limit{}
		}
		if got := Effective(in, c.o, c.mult); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestWindowStart(t *testing.T) {
	now := time.Date(2026, 2, 28, 23, 59, 30, 0, time.UTC)
	for _, c := range []struct {
		w          Window
		start, end time.Time
	}{
		{Minute, time.Date(2026, 2, 28, 23, 59, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{Hour, time.Date(2026, 2, 28, 23, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{Day, time.Date(2026, 2, 28, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{Month, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
	} {
		s, e := c.w.Start(now.In(time.FixedZone("x", 5*3600)))
		if !s.Equal(c.start) || !e.Equal(c.end) {
			t.Errorf("%s: %s..%s, want %s..%s", c.w, s, e, c.start, c.end)
		}
	}
	if Micros(0.0000001) != 1 || Micros(1) != 1_000_000 || Micros(-1) != 0 {
		t.Error("Micros must round up and ignore negatives")
	}
}

func TestParseConfigNamesLineAndField(t *testing.T) {
	good := `budgets:
  - {name: global-day, scope: global, window: day, usd: 50}
  - {name: quests, scope: purpose, match: quest_seed, window: hour, usd: 2, degrade_at: 0.8}
  - {name: per-player, scope: actor, window: hour, usd: 0.05, tokens: 20000}
  - {name: gpt4o, scope: model, match: openai:gpt-4o, window: month, usd: 300}
  - {name: each-location, scope: location, window: minute, tokens: 5000}
`
	c, err := ParseConfig([]byte(good))
	if err != nil || len(c.Budgets) != 5 || c.Budgets[1].DegradeAt != 0.8 || c.Budgets[2].Tokens != 20000 {
		t.Fatalf("%v %+v", err, c)
	}
	for _, b := range []struct{ yaml, want string }{
		{"budgets:\n  - name: a\n    scope: global\n    window: weekly\n    usd: 1\n", "line 4: budget \"a\": field window: \"weekly\" is not one of minute, hour, day, month"},
		{"budgets:\n  - name: a\n    scope: global\n    window: day\n    usd: 1\n    tokns: 5\n", "line 6: field tokns: unknown"},
		{"budgets:\n  - name: a\n    scope: galaxy\n    window: day\n    usd: 1\n", "line 3: budget \"a\": field scope: \"galaxy\""},
		{"budgets:\n  - name: a\n    scope: global\n    window: day\n", "line 2: budget \"a\": field usd: set usd, tokens or both"},
		{"budgets:\n  - name: a\n    scope: global\n    window: day\n    usd: -3\n", "line 5: budget \"a\": field usd: -3 is negative"},
		{"budgets:\n  - name: a\n    scope: global\n    window: day\n    usd: lots\n", "line 5: cannot unmarshal"},
		{"budgets:\n  - name: a\n    scope: purpose\n    window: day\n    usd: 1\n", "line 2: budget \"a\": field match: a purpose budget names its purpose"},
		{"budgets:\n  - {name: a, scope: global, window: day, usd: 1}\n  - {name: a, scope: global, window: hour, usd: 1}\n", "line 3: budget \"a\": field name: \"a\" is already used by the budget on line 2"},
		{"budgets:\n  - name: Bad Name\n    scope: global\n", "line 2: budget \"Bad Name\": field name:"},
		{"budgets:\n  - name: a\n    scope: model\n    match: gpt-4o\n    window: day\n    usd: 1\n", "line 4: budget \"a\": field match: \"gpt-4o\": a model budget names provider:model"},
		{"budgets:\n  - name: a\n    scope: global\n    window: day\n    usd: 1\n    degrade_at: 1.5\n", "line 6: budget \"a\": field degrade_at"},
		{"budget:\n  - name: a\n", "line 1: field budget: unknown"},
		{"budgets: [\n", "not valid YAML"},
	} {
		_, err := ParseConfig([]byte(b.yaml))
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%q:\n got %v\nwant it to contain %q", b.yaml, err, b.want)
		}
	}
}
