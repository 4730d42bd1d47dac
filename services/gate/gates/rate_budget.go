package gates

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/actorpolicy"
)

// The rate gate's arithmetic: what a proposal reserves, the budget rule, a repeat offender's
// tightened limits, what the reservations' answers add up to and the refusal's sentence, all
// without NATS (rate.go does the KV reads and writes).

// ratePlan is what the rate gate reserves for one proposal, worked out from the proposal, its
// budget, the clock and the actor's policy alone (planRate).
type ratePlan struct {
	token  string // the proposal attempt's admission token
	marker string // the admission marker's key, for windows that record no tokens
	cost   int64  // micro-USD
	window time.Duration
	start  time.Time // of the fixed window now falls in
	// retryAfter is the seconds until the window ends.
	retryAfter float64
	// scopes are the limited scopes, the actor's first: the actor's and the global window.
	scopes []scope
	// tracked: the actor's window records the proposals it admits; without one, the marker does.
	tracked bool
	// tightened is the repeat offender's policy that scaled the actor's limit (nil: none).
	tightened *actorpolicy.Policy
	holder    string // whose budget the proposal draws on (budgetHolder)
}

// planRate works out what proposal p reserves under budget b in the window now falls in;
// policy is the actor policy of a budget holder (read only when the actor's budget is limited).
func planRate(p *events.Proposal, b Budget, window time.Duration, now time.Time, policy func(holder string) *actorpolicy.Policy) ratePlan {
	pl := ratePlan{token: hashKey(p.ProposalID + ":" + strconv.Itoa(p.Attempt)), window: window, holder: budgetHolder(p)}
	pl.marker = "admitted." + pl.token
	if p.Provenance != nil {
		pl.cost = micros(p.Provenance.CostUSD)
	}
	pl.start, pl.retryAfter = windowOf(now, window)
	win := strconv.FormatInt(pl.start.Unix(), 10)
	actorLimit := limit{b.ActorCount, micros(b.ActorCostUSD)}
	if !actorLimit.unlimited() {
		pol := policy(pl.holder)
		if l, ok := tighten(actorLimit, pol, now); ok {
			actorLimit, pl.tightened = l, pol
		}
	}
	actor := scope{name: "actor", key: p.Kind + ".actor." + hashKey(pl.holder) + "." + win, limit: actorLimit}
	global := scope{name: "global", key: p.Kind + ".global." + win, limit: limit{b.GlobalCount, micros(b.GlobalCostUSD)}}
	pl.tracked = !actor.limit.unlimited()
	if pl.tracked {
		actor.token = pl.token
	}
	// The scopes are reserved at once, not one after the other: each is a KV round trip (the
	// global one waits for the batch in flight), and a move waited for both in turn. A scope
	// reserved for a proposal another scope refused, or found to be a redelivery, is given
	// back; until then it holds one more than it should, which errs on admitting less.
	for _, s := range []scope{actor, global} {
		if !s.limit.unlimited() {
			pl.scopes = append(pl.scopes, s)
		}
	}
	return pl
}

// tally is what the answers of reserveAll add up to.
type tally struct {
	taken      []scope // the scopes this delivery took, to give back if it does not pass
	redelivery bool    // a scope holds the proposal already: admitted before
	refused    int     // the first scope that refused; -1: none
	err        error   // the first scope's error
}

// tallyOf sums up res, the answers of reserveAll for scopes.
func tallyOf(scopes []scope, res []reserved) tally {
	t := tally{refused: -1}
	for i, r := range res {
		if r.tried && r.err == nil && r.ok && !r.again {
			t.taken = append(t.taken, scopes[i])
		}
		t.redelivery = t.redelivery || r.again
		if r.err != nil && t.err == nil {
			t.err = r.err
		}
		if r.tried && r.err == nil && !r.ok && t.refused < 0 {
			t.refused = i
		}
	}
	return t
}

// refusal is the transient RATE_LIMITED rejection of p, whose scope s refused with used spent.
func refusal(p *events.Proposal, pl ratePlan, s scope, used usage) Decision {
	who, why := "the global", ""
	details := map[string]any{"scope": s.name, "window": pl.window.String(), "windowStart": pl.start.UTC(), "count": used.Count, "costUsd": float64(used.CostMicros) / 1e6,
		"limitCount": s.limit.Count, "limitCostUsd": float64(s.limit.CostMicros) / 1e6}
	if s.name == "actor" {
		who = pl.holder + "'s"
		if pl.tightened != nil {
			why = fmt.Sprintf(", tightened ×%g for a repeat offender until %s", pl.tightened.Multiplier, pl.tightened.CoolDownUntil.UTC().Format(time.RFC3339))
			details["offender"] = map[string]any{"multiplier": pl.tightened.Multiplier, "coolDownUntil": pl.tightened.CoolDownUntil.UTC(), "strikes": pl.tightened.Strikes}
		}
	}
	return RejectTransient(events.CodeRateLimited,
		fmt.Sprintf("%s budget for %s proposals is spent for this %s window (%s%s): try again in %.0f s.", capitalize(who), p.Kind, pl.window, usedText(used, s.limit), why, pl.retryAfter),
		details, pl.retryAfter)
}

// maxAdmitted bounds an actor window's admission tokens; a redelivery of a proposal older than
// the last maxAdmitted of its actor's window is counted again (admitting less, never more).
const maxAdmitted = 256

// withAdmitted is u with token added to its admission tokens (in a new slice), the oldest
// dropped past maxAdmitted.
func withAdmitted(u usage, token string) usage {
	keep := u.Admitted[max(0, len(u.Admitted)-maxAdmitted+1):]
	u.Admitted = append(slices.Clip(keep), token)
	return u
}

// limit is one scope's budget; zero fields are unlimited.
type limit struct {
	Count      int
	CostMicros int64
}

func (l limit) unlimited() bool { return l.Count <= 0 && l.CostMicros <= 0 }

// admit is the pure budget rule: whether one more proposal costing cost fits, and the usage
// after it.
func admit(u usage, cost int64, l limit) (usage, bool) {
	next := usage{Count: u.Count + 1, CostMicros: u.CostMicros + cost}
	if l.Count > 0 && next.Count > l.Count {
		return u, false
	}
	if l.CostMicros > 0 && next.CostMicros > l.CostMicros {
		return u, false
	}
	return next, true
}

// windowOf is the fixed window now falls in: its start and the seconds until it ends.
func windowOf(now time.Time, size time.Duration) (start time.Time, retryAfter float64) {
	start = now.Truncate(size)
	return start, math.Ceil(start.Add(size).Sub(now).Seconds())
}

func micros(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

func hashKey(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:12])
}

// tighten is the pure rule for a repeat offender: while the actor policy's cool-down lasts,
// the actor's limits are scaled by its multiplier (never below one proposal or one micro-USD);
// it reports whether it changed anything.
func tighten(l limit, p *actorpolicy.Policy, now time.Time) (limit, bool) {
	if p == nil || !now.Before(p.CoolDownUntil) || !(p.Multiplier > 0 && p.Multiplier < 1) {
		return l, false
	}
	if l.Count > 0 {
		l.Count = max(1, int(math.Floor(float64(l.Count)*p.Multiplier)))
	}
	if l.CostMicros > 0 {
		l.CostMicros = max(1, int64(math.Floor(float64(l.CostMicros)*p.Multiplier)))
	}
	return l, true
}

// budgetHolder is whose budget a proposal draws on: the player its payload names, else its
// actor. A player's budget is one whatever actor id the proposal claims.
func budgetHolder(p *events.Proposal) string {
	var named struct {
		PlayerID string `json:"playerId"`
	}
	if json.Unmarshal(p.Payload, &named) == nil && named.PlayerID != "" {
		return "player:" + strings.TrimPrefix(named.PlayerID, "player:")
	}
	if p.Actor.Kind == "player" {
		return "player:" + strings.TrimPrefix(p.Actor.ID, "player:")
	}
	return p.Actor.Kind + ":" + p.Actor.ID
}

type scope struct {
	name  string
	key   string
	limit limit
	token string // the admission token the window records ("": none)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func usedText(u usage, l limit) string {
	if l.Count > 0 && u.Count+1 > l.Count {
		return fmt.Sprintf("%d of %d proposals used", u.Count, l.Count)
	}
	return fmt.Sprintf("$%.4f of $%.4f used", float64(u.CostMicros)/1e6, float64(l.CostMicros)/1e6)
}
