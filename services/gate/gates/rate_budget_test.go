package gates

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/actorpolicy"
)

// The rate gate's plan for a proposal is arithmetic on the proposal, its budget, the clock and
// the actor's policy: no NATS.
func TestPlanRate(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 20, 0, time.UTC)
	payload, _ := json.Marshal(events.PlayerMovedPayload{PlayerID: "player:ada"})
	p := &events.Proposal{ProposalID: "p1", Attempt: 2, Kind: events.KindPlayerMoved, Payload: payload,
		Actor: events.Actor{Kind: "agent", ID: "world-rules"}, Provenance: &events.Provenance{CostUSD: 0.0125}}
	noPolicy := func(string) *actorpolicy.Policy { return nil }

	pl := planRate(p, Budget{ActorCount: 10, GlobalCount: 100, GlobalCostUSD: 1}, time.Minute, now, noPolicy)
	if pl.cost != 12500 || !pl.start.Equal(now.Truncate(time.Minute)) || pl.retryAfter != 40 || pl.holder != "player:ada" {
		t.Fatalf("plan = cost %d, window start %s, retry after %g s, holder %s", pl.cost, pl.start, pl.retryAfter, pl.holder)
	}
	if len(pl.scopes) != 2 || pl.scopes[0].name != "actor" || pl.scopes[1].name != "global" || !pl.tracked ||
		pl.scopes[0].token != pl.token || pl.scopes[1].token != "" || pl.marker != "admitted."+pl.token {
		t.Fatalf("scopes %+v, tracked %t", pl.scopes, pl.tracked)
	}
	if again := planRate(p, Budget{ActorCount: 10}, time.Minute, now.Add(time.Second), noPolicy); again.token != pl.token || again.scopes[0].key != pl.scopes[0].key {
		t.Error("the same attempt in the same window has another token or key")
	}

	// Without an actor budget, only the global window is reserved, and the marker records.
	global := planRate(p, Budget{GlobalCount: 100}, time.Minute, now, func(string) *actorpolicy.Policy {
		t.Error("the actor policy was read though the actor's budget is unlimited")
		return nil
	})
	if len(global.scopes) != 1 || global.scopes[0].name != "global" || global.tracked {
		t.Fatalf("global only: scopes %+v, tracked %t", global.scopes, global.tracked)
	}

	// A repeat offender's limit is tightened while its cool-down lasts.
	pol := &actorpolicy.Policy{Multiplier: 0.25, CoolDownUntil: now.Add(time.Hour), Strikes: 2}
	tight := planRate(p, Budget{ActorCount: 10}, time.Minute, now, func(holder string) *actorpolicy.Policy {
		if holder != "player:ada" {
			t.Errorf("policy read for %s, want the budget holder player:ada", holder)
		}
		return pol
	})
	if tight.scopes[0].limit.Count != 2 || tight.tightened != pol {
		t.Fatalf("tightened limit %d (policy %v), want 2", tight.scopes[0].limit.Count, tight.tightened)
	}
	d := refusal(p, tight, tight.scopes[0], usage{Count: 2})
	if d.Outcome != Rejected || !d.Transient || d.RetryAfter != 40 || d.Code != events.CodeRateLimited ||
		!strings.Contains(d.Reason, "Player:ada's budget for player_moved proposals is spent for this 1m0s window (2 of 2 proposals used, tightened ×0.25") {
		t.Fatalf("refusal = %+v", d)
	}
}

// What reserveAll's answers add up to: the scopes taken, a redelivery, the first refusal and
// the first error.
func TestTallyOf(t *testing.T) {
	actor, global := scope{name: "actor"}, scope{name: "global"}
	boom := errors.New("kv down")
	for _, c := range []struct {
		name       string
		res        []reserved
		taken      int
		redelivery bool
		refused    int
		err        error
	}{
		{"both admit", []reserved{{tried: true, ok: true}, {tried: true, ok: true}}, 2, false, -1, nil},
		{"actor refuses, global not tried", []reserved{{tried: true}, {}}, 0, false, 0, nil},
		{"global refuses after the actor took", []reserved{{tried: true, ok: true}, {tried: true}}, 1, false, 1, nil},
		{"a redelivery", []reserved{{tried: true, ok: true, again: true}, {tried: true, ok: true}}, 1, true, -1, nil},
		{"an error", []reserved{{tried: true, err: boom}, {tried: true, ok: true}}, 1, false, -1, boom},
	} {
		got := tallyOf([]scope{actor, global}, c.res)
		if len(got.taken) != c.taken || got.redelivery != c.redelivery || got.refused != c.refused || !errors.Is(got.err, c.err) {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}
