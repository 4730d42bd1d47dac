package gates_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// text returns distinct, harmless prose: ten words drawn from a synthetic vocabulary, so that
// two texts share almost no shingles and are never near-duplicates by accident.
func text(r *rand.Rand) string {
	words := make([]string, 10)
	for i := range words {
		n := r.IntN(5000)
		var b strings.Builder
		for j := 0; j < 3; j++ {
			b.WriteByte(byte('a' + n%26))
			n /= 26
		}
		words[i] = "v" + b.String() + "o"
	}
	return strings.Join(words, " ") + "."
}

// hourClock is the wall clock shifted to the start of an hour, so a test's rate windows never
// straddle a window boundary.
func hourClock() func() time.Time {
	start := time.Now()
	base := start.Truncate(time.Hour)
	return func() time.Time { return base.Add(time.Since(start)) }
}

type expect struct {
	gate string      // "" validated, "approval" held, else the rejecting gate
	code events.Code // for rejections
	pair string      // near-duplicate partner: exactly one of the two is rejected
}

// TestThousandMixedProposalsEachEndExactlyOnce runs every gate in one process on the embedded
// stack and checks that each of 1,000 mixed proposals ends exactly once, where it should, with
// a complete trail.
func TestThousandMixedProposalsEachEndExactlyOnce(t *testing.T) {
	s := newStack(t)
	cfg := testConfig()
	cfg.Rate.Budgets = map[string]gates.Budget{events.KindPlayerMoved: {ActorCount: 20}}
	deps := s.deps(cfg)
	deps.Now = hourClock()
	s.run(t, deps, "all")

	r := rand.New(rand.NewPCG(1, 2))
	want := map[string]expect{}
	var all []*events.Proposal
	add := func(p *events.Proposal, e expect) {
		all = append(all, p)
		want[p.ProposalID] = e
	}
	locs := []string{"loc:square", "loc:gate", "loc:tower"}
	for i := range 300 {
		add(ambience(t, locs[i%3], text(r)), expect{})
	}
	for range 100 {
		add(proposal(t, events.KindNPCDialogue, map[string]any{"npcId": "npc:bram", "playerId": "player:ada", "locationId": "loc:square", "line": text(r), "intent": "greet"}), expect{})
	}
	for range 100 {
		p := ambience(t, "loc:square", text(r))
		p.Payload = json.RawMessage(strings.Replace(string(p.Payload), `"mood"`, `"tone":"x","mood"`, 1))
		add(p, expect{gate: "schema", code: events.CodeSchemaInvalid})
	}
	for range 100 {
		add(ambience(t, "loc:square", text(r)+" The crowd chose to disembowel the bard."), expect{gate: "safety", code: events.CodeSafetyFlagged})
	}
	for i := range 100 {
		add(ambience(t, fmt.Sprintf("loc:void-%d", i), text(r)), expect{gate: "invariant", code: events.CodeInvariantViolation})
	}
	for range 50 {
		body := text(r)
		a, b := ambience(t, "loc:market", body), ambience(t, "loc:market", strings.ToUpper(body))
		add(a, expect{pair: b.ProposalID})
		add(b, expect{pair: a.ProposalID})
	}
	for range 100 {
		p := ambience(t, "loc:gate", text(r))
		p.Provenance.PromptTemplate = nil
		add(p, expect{gate: "replay", code: events.CodeReplayIncomplete})
	}
	moves := 0
	for range 60 {
		p := proposal(t, events.KindPlayerMoved, map[string]any{"playerId": "player:ada", "fromLocationId": "loc:square", "toLocationId": "loc:gate", "direction": "north"})
		add(p, expect{gate: "rate?"})
		moves++
	}
	for range 40 {
		add(proposal(t, events.KindNPCRemoved, map[string]any{"npcId": "npc:bram", "reason": "retired"}), expect{gate: "approval"})
	}
	if len(all) != 1000 {
		t.Fatalf("built %d proposals", len(all))
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	start := time.Now()
	for _, p := range all {
		s.publish(t, p)
	}
	ended := func() int {
		return s.count(t, "PROPOSALS", events.SubjectValidatedAll) + s.count(t, "PROPOSALS", "proposals.rejected.>") + s.count(t, "PROPOSALS", events.SubjectApproval)
	}
	natstest.WaitFor(t, 60*time.Second, "1,000 proposals to end", func() bool { return ended() >= len(all) })
	t.Logf("1,000 mixed proposals through the chain in %s", time.Since(start).Round(time.Millisecond))

	validated := s.proposalsOn(t, events.SubjectValidatedAll)
	held := s.proposalsOn(t, events.SubjectApproval)
	rejected := s.rejections(t)
	if n := s.count(t, "DLQ", ""); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	if got := len(validated) + len(held) + len(rejected); got != len(all) {
		t.Fatalf("%d outcomes for %d proposals", got, len(all))
	}
	admittedMoves := 0
	for _, p := range all {
		id, e := p.ProposalID, want[p.ProposalID]
		v, h, rj := validated[id], held[id], rejected[id]
		ends := 0
		for _, x := range []bool{v != nil, h != nil, rj != nil} {
			if x {
				ends++
			}
		}
		if ends != 1 {
			t.Fatalf("proposal %s (%s) ended %d times", id, p.Kind, ends)
		}
		full, _ := route.Default().For(p.Kind)
		switch {
		case e.pair != "":
			other := e.pair
			if (rj == nil) == (rejected[other] == nil) {
				t.Fatalf("near-duplicate pair %s/%s: want exactly one rejected", id, other)
			}
			if rj != nil && (rj.Code != events.CodeDuplicate || rj.Details["duplicateOf"] != other) {
				t.Fatalf("near-duplicate %s: %+v", id, rj)
			}
			if v != nil {
				checkTrail(t, v, full, len(full))
			}
		case e.gate == "rate?":
			if v != nil {
				admittedMoves++
				checkTrail(t, v, full, len(full))
			} else if rj == nil || rj.Gate != "rate" || rj.Code != events.CodeRateLimited {
				t.Fatalf("move %s: %+v", id, rj)
			}
		case e.gate == "":
			if v == nil {
				t.Fatalf("valid %s %s was not validated: %+v", p.Kind, id, rj)
			}
			checkTrail(t, v, full, len(full))
		case e.gate == "approval":
			if h == nil {
				t.Fatalf("destructive %s not held: %+v", id, rj)
			}
			checkTrail(t, h, full, slices.Index(full, "approval")+1)
		default:
			if rj == nil || rj.Gate != e.gate || rj.Code != e.code {
				t.Fatalf("%s: want %s %s, got %+v", id, e.gate, e.code, rj)
			}
			checkTrail(t, rj.Proposal, full, slices.Index(full, e.gate)+1)
		}
	}
	if admittedMoves != 20 {
		t.Fatalf("%d moves admitted on a budget of 20", admittedMoves)
	}
}

// checkTrail checks that p's trail names the first n gates of its route, in order, every one
// passed but the last (which may reject or hold).
func checkTrail(t *testing.T, p *events.Proposal, full []string, n int) {
	t.Helper()
	if len(p.Route.Trail) != n {
		t.Fatalf("%s trail %+v, want the first %d of %v", p.ProposalID, p.Route.Trail, n, full)
	}
	for i, h := range p.Route.Trail {
		if h.Gate != full[i] || (i < n-1 && h.Outcome != events.OutcomePassed) || h.At.IsZero() {
			t.Fatalf("%s hop %d: %+v (route %v)", p.ProposalID, i, h, full)
		}
	}
}

// BenchmarkChainThroughput is proposals/s through the whole AI route (seven gates, MCP
// moderation, graph reads, KV compare-and-set, audit) on the embedded stack.
func BenchmarkChainThroughput(b *testing.B) {
	s := newStack(b)
	cfg := testConfig()
	deps := s.deps(cfg)
	deps.Now = hourClock()
	s.run(b, deps, "all")
	r := rand.New(rand.NewPCG(3, 4))
	ps := make([]*events.Proposal, b.N)
	for i := range ps {
		ps[i] = ambience(b, []string{"loc:square", "loc:gate", "loc:tower", "loc:market"}[i%4], text(r))
	}
	b.ResetTimer()
	for _, p := range ps {
		s.publish(b, p)
	}
	natstest.WaitFor(b, 2*time.Minute, "all validated", func() bool {
		return s.count(b, "PROPOSALS", events.SubjectValidatedAll) >= b.N
	})
	b.StopTimer()
	if n := s.count(b, "PROPOSALS", "proposals.rejected.>") + s.count(b, "DLQ", ""); n != 0 {
		b.Fatalf("%d proposals rejected or dead-lettered", n)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
}
