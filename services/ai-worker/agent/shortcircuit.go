package agent

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
)

// Defaults of ShortCircuit.
const (
	DefaultShortCircuitAfter    = 2
	DefaultShortCircuitWindow   = 10 * time.Minute
	DefaultShortCircuitCooldown = 5 * time.Minute
	DefaultShortCircuitSize     = 4096
)

// ShortCircuitConfig bounds the reuse short-circuit. The zero value is the defaults; After < 0
// turns it off.
type ShortCircuitConfig struct {
	// After: this many reuses in a row for one target, each within Window of the one before,
	// start a cooldown (default 2).
	After int
	// Window: a reuse further than this from the previous one starts the count again
	// (default 10 minutes).
	Window time.Duration
	// Cooldown: for this long after the reuse that started it, requests for the target are
	// answered with the accepted content without a model call (default 5 minutes).
	Cooldown time.Duration
	// Size: targets remembered at most (default 4096; the least recent are forgotten).
	Size int
}

// ShortCircuit is the reuse short-circuit ("reuse hash → short-circuit", issue 41): a target
// (a location's quest seeds or ambience, an NPC–player pair's lines: the dedup gate's scope)
// whose recent requests keep ending in reuse — the model's answers near-duplicate content
// already accepted for it — is answered from that accepted content without calling the model,
// for a cooldown. Each such answer is a reused outcome, as when the dedup gate offered the
// content, so the game can tell.
//
// The policy, per role and target:
//   - each request that ended in reuse counts; a reuse more than Window after the previous
//     one starts the count at 1, and a request for the target that ended otherwise as far as
//     this worker sees (a reprompt, fallback content) resets it to 0;
//   - the After-th reuse in a row starts a Cooldown; until it ends, requests are answered with
//     the latest accepted content (Decide), and further reuses update the content but never
//     extend the cooldown;
//   - when the cooldown has ended the target is forgotten: the next request asks the model
//     (which may now write something new), and only After more reuses start another cooldown.
//
// So at most one cooldown follows every After model-paid reuses, and content is never served
// for longer than Cooldown past the last time the dedup gate offered it. A request whose
// words the line must answer (an npc_dialogue trigger carrying what the player said) is never
// short-circuited. The state is this replica's own, in memory (replicas each learn it).
type ShortCircuit struct {
	cfg     ShortCircuitConfig
	mu      sync.Mutex
	targets *expirable.LRU[string, *streak]
}

// streak is one target's run of reuses.
type streak struct {
	n     int
	last  time.Time
	until time.Time // end of the cooldown (zero: none)
	reuse events.Reuse
}

// NewShortCircuit returns the policy with cfg's bounds (nil when cfg.After < 0: off).
func NewShortCircuit(cfg ShortCircuitConfig) *ShortCircuit {
	if cfg.After < 0 {
		return nil
	}
	if cfg.After == 0 {
		cfg.After = DefaultShortCircuitAfter
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultShortCircuitWindow
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = DefaultShortCircuitCooldown
	}
	if cfg.Size <= 0 {
		cfg.Size = DefaultShortCircuitSize
	}
	// Entries outlive neither a window nor a cooldown (the LRU's own TTL is only a bound: the
	// decisions read the times kept in the streak).
	return &ShortCircuit{cfg: cfg, targets: expirable.NewLRU[string, *streak](cfg.Size, nil, cfg.Window+cfg.Cooldown)}
}

// Reused records that a request for key ended in reuse of r at now.
func (s *ShortCircuit) Reused(key string, r events.Reuse, now time.Time) {
	if s == nil || key == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.targets.Get(key)
	if !ok {
		st = &streak{}
	}
	st.reuse = r
	if !st.until.IsZero() {
		if now.Before(st.until) {
			st.last = now // in a cooldown: newer content, the same end
			s.targets.Add(key, st)
			return
		}
		*st = streak{reuse: r} // the cooldown is over: count again
	}
	if st.n > 0 && now.Sub(st.last) > s.cfg.Window {
		st.n = 0
	}
	st.n++
	st.last = now
	if st.n >= s.cfg.After {
		st.until = now.Add(s.cfg.Cooldown)
	}
	s.targets.Add(key, st)
}

// Other records that a request for key ended otherwise than in reuse (a reprompt, fallback
// content): the run is broken. A cooldown already started runs its course.
func (s *ShortCircuit) Other(key string, now time.Time) {
	if s == nil || key == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.targets.Get(key); ok && (st.until.IsZero() || !now.Before(st.until)) {
		s.targets.Remove(key)
	}
}

// Decide reports whether a request for key at now is answered with accepted content (and
// which) instead of a model call. A cooldown that has ended forgets the target.
func (s *ShortCircuit) Decide(key string, now time.Time) (events.Reuse, bool) {
	if s == nil || key == "" {
		return events.Reuse{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.targets.Get(key)
	switch {
	case !ok || st.until.IsZero():
		return events.Reuse{}, false
	case now.Before(st.until):
		return st.reuse, true
	}
	s.targets.Remove(key)
	return events.Reuse{}, false
}

// shortCircuitKey is the role's target for a request, from the fields its trigger binds: the
// dedup gate's scope (events' payload Target: a location for quest seeds and ambience, an
// NPC–player pair for lines). "" when the role's requests are never short-circuited: roles
// without a model, kinds with another scope, and a line that answers what the player said.
func shortCircuitKey(role roles.Role, bind map[string]string) string {
	if !role.UsesLLM {
		return ""
	}
	var target string
	switch role.Kind {
	case events.KindQuestSeed, events.KindAmbience:
		target = bind["locationId"]
	case events.KindNPCDialogue:
		if bind[roles.BindPlayerSaid] != "" || bind["npcId"] == "" || bind["playerId"] == "" {
			return ""
		}
		target = bind["npcId"] + "|" + bind["playerId"]
	}
	if target == "" {
		return ""
	}
	return role.Name + "\x00" + role.Kind + "\x00" + target
}

// payloadKey is shortCircuitKey for a refused proposal of role: its payload's target. The
// trigger's bound fields are written over every answer, so both name the same target.
func payloadKey(role roles.Role, p *events.Proposal) string {
	if p == nil || p.Kind != role.Kind {
		return ""
	}
	pl, err := events.DecodePayload(p.Kind, p.Payload)
	if err != nil {
		return ""
	}
	bind := map[string]string{}
	switch x := pl.(type) {
	case *events.QuestSeedPayload:
		bind["locationId"] = x.LocationID
	case *events.AmbiencePayload:
		bind["locationId"] = x.LocationID
	case *events.NPCDialoguePayload:
		bind["npcId"], bind["playerId"], bind[roles.BindPlayerSaid] = x.NPCID, x.PlayerID, x.PlayerSaid
	}
	return shortCircuitKey(role, bind)
}

// shortCircuited is the reused outcome of a request answered by the short-circuit: no
// proposal was made, so its id derives from the event and the role (a redelivered trigger is
// the same outcome) and it has no journey (nothing was paid).
func shortCircuited(env *events.Envelope, role roles.Role, locationID string, r events.Reuse, at time.Time) *events.Outcome {
	r.AcceptedUTC = r.AcceptedUTC.UTC()
	return &events.Outcome{
		SchemaVersion: events.OutcomeSchemaVersion, OutcomeID: events.OutcomeID("reused", env.EventID+"/"+role.Name), Kind: events.OutcomeReused,
		EventID: env.EventID, CorrelationID: env.CorrelationID, ProposalKind: role.Kind, AgentRole: role.Name,
		Actor: env.Actor, LocationID: locationID, Reuse: &r, DecidedUTC: at.UTC(),
	}
}
