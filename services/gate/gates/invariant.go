package gates

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/groupcommit"
	"github.com/worldgate/worldgate/shared/runtime"
)

// invariant checks domain rules against the graph through a read-only connection.
//
// Ordering within a world-load batch: a world-building proposal (location_created, exit_added,
// npc_created, …) may reference an entity created by an earlier proposal of the same batch that
// is not committed yet. Rules that waiting cannot change (a created entity already exists, an
// exit direction already taken, a self-loop) reject at once. A reference to an entity that does
// not exist yet makes the gate ask the graph again, every PollInterval, for up to ReferenceWait;
// if it is still missing the proposal is rejected as transient (retryAfter), so the loader can
// propose it again once its dependencies have committed. The gate is a check at one moment: the
// event-processor must re-check at commit (two exits with one direction may pass concurrently).
// Proposals produced by agents (ambience, dialogue, quests, moves) and destructive ones get no
// wait: what they reference must exist now.
//
// A player's next move may arrive before the previous one has committed (it is on its way
// through the gates after this one, or held by an event-processor that restarts). The gate
// remembers the last move it passed per player. A move that starts where that move ends, from a
// player the graph still shows where that move starts, is not refused at once: it is handed back
// and decided again after its backoff (its player's later moves wait behind it), and refused
// as before only on its last delivery, if the previous move has still not committed (it was
// refused after this gate in another process, or is later than the backoff). A refusal for good
// by a later gate of the same run (fusion) makes the gate forget the move at once (Forgetter);
// a transient one does not, as it cannot when the gates run apart: the move comes back to the
// gate that refused it and may still commit.
//
// A proposal that comes back after the event-processor decided it (JetStream redelivers it, or
// a copy arrives) is settled at once: its apply-once marker, read in the same traversal as its
// facts, exists, so it is acknowledged without being forwarded or refused. Without this, a
// committed move checked again against the world it changed was handed back again and again
// while its player's later moves waited behind it.
//
// The checks running at the same moment share their reads (package groupcommit): while
// factsRequests reads are in flight the others wait, and the next read asks for every vertex
// they need, up to factsBatch checks in one traversal.
type invariant struct {
	graph Graph
	cfg   InvariantConfig
	moves *lru.Cache[string, passedMove] // by player: the last move this gate passed
	reads *groupcommit.Group[[]any, map[string]graphx.Props]
}

// factsBatch is how many checks' reads one traversal carries at most, factsRequests how many
// such traversals are in flight at once (BenchmarkMoveReads: one move's read alone costs graphd
// and the client 76–105 µs of CPU, sixteen moves' read together 11–12 µs a move).
const (
	factsBatch    = 32
	factsRequests = 2
)

// passedMove is a move the invariant gate passed.
type passedMove struct {
	proposal string
	from, to string
	at       time.Time
}

// movesRemembered bounds the players whose last passed move the gate remembers, and
// moveRemembered how long: a move not committed after it is not waited for.
const (
	movesRemembered = 1 << 16
	moveRemembered  = 2 * time.Minute
)

// errPreviousMove hands a move back to wait for the player's previous move to commit.
var errPreviousMove = errors.New("the player's previous move has not committed yet: deciding this one again after its backoff")

// Invariant is the invariant gate's name.
const Invariant = events.GateInvariant

// invariantGate declares the invariant gate (see Spec).
var invariantGate = Spec{
	Name: Invariant, New: newInvariant,
	Summary: "domain rules against the graph, read-only: referenced entities exist, exits unique",
	Needs:   []Need{NeedGraphReader},
}

func newInvariant(_ context.Context, d Deps) (Gate, error) {
	if d.Graph == nil {
		return nil, errors.New("the invariant gate needs a read-only graph connection")
	}
	moves, err := lru.New[string, passedMove](movesRemembered)
	if err != nil {
		return nil, err
	}
	g := &invariant{graph: d.Graph, cfg: d.Config.Invariant, moves: moves}
	g.reads = groupcommit.New(factsBatch, factsRequests, g.read)
	return g, nil
}

func (*invariant) Name() string { return Invariant }

// facts are what the graph says about the entities a proposal touches.
type facts struct {
	exists   map[string]bool
	exits    map[string]string // direction → target location, of needs.exitsOf
	playerAt []string          // locations the player is at
	npcAt    []string          // locations the NPC is at
	decided  bool              // the proposal's apply-once marker exists (needs.marker)
}

// needs are the graph reads a proposal's rules depend on.
type needs struct {
	ids      []string
	exitsOf  string
	playerOf string
	npcOf    string
	// marker is the apply-once marker of the proposal's domain event, which the event-processor
	// writes when it applies the event or refuses it at commit: read in the same traversal.
	marker string
}

// violation is one broken rule; waitable ones may resolve when earlier proposals commit.
// elsewhere marks a moving player who is not at the move's origin.
type violation struct {
	sentence  string
	waitable  bool
	elsewhere bool
}

func entity(id string) string { return events.EntityName(id) }

// worldBuilding kinds may wait for references created earlier in their batch: the kinds that
// build the world (events.KindInfo.WorldBuilding), except destructive ones, which get no wait
// (nor do agent kinds). A new world-building kind waits without an edit here.
func worldBuilding(kind string) bool {
	info, ok := events.LookupKind(kind)
	return ok && info.WorldBuilding && !info.Destructive
}

// needsOf lists the graph reads for a payload: the entities it references or creates, and
// the extra facts its kind's rules need.
func needsOf(payload events.Payload) needs {
	n := needs{ids: payload.References()}
	if c := payload.Creates(); c != "" {
		n.ids = append(n.ids, c)
	}
	switch p := payload.(type) {
	case *events.NPCDialoguePayload:
		n.npcOf = p.NPCID
	case *events.PlayerMovedPayload:
		n.exitsOf, n.playerOf = p.FromLocationID, p.PlayerID
	case *events.ExitAddedPayload:
		n.exitsOf = p.FromLocationID
	case *events.ExitRemovedPayload:
		n.exitsOf = p.FromLocationID
	}
	return n
}

// invariantRules is the pure rule set: what is wrong with the proposal given the facts.
func invariantRules(kind string, payload events.Payload, f facts) []violation {
	wb := worldBuilding(kind)
	var out []violation
	mustExist := func(ids ...string) {
		for _, id := range ids {
			if id != "" && !f.exists[id] {
				out = append(out, violation{sentence: fmt.Sprintf("The %s does not exist.", entity(id)), waitable: wb})
			}
		}
	}
	mustNotExist := func(id string) {
		if f.exists[id] {
			out = append(out, violation{sentence: fmt.Sprintf("The %s already exists: choose another id, or propose a change instead.", entity(id))})
		}
	}
	if c := payload.Creates(); c != "" {
		mustNotExist(c)
	}
	mustExist(payload.References()...)
	// The rules beyond existence.
	switch p := payload.(type) {
	case *events.NPCDialoguePayload:
		// An NPC answers only where it is.
		if f.exists[p.NPCID] && f.exists[p.LocationID] && !contains(f.npcAt, p.LocationID) {
			where := "nowhere"
			if len(f.npcAt) > 0 {
				where = "at " + strings.Join(f.npcAt, ", ")
			}
			out = append(out, violation{sentence: fmt.Sprintf("The %s is %s, not at %s: it cannot be spoken to there.", entity(p.NPCID), where, p.LocationID)})
		}
	case *events.PlayerMovedPayload:
		if f.exists[p.PlayerID] && !contains(f.playerAt, p.FromLocationID) {
			where := "nowhere"
			if len(f.playerAt) > 0 {
				where = "at " + strings.Join(f.playerAt, ", ")
			}
			out = append(out, violation{sentence: fmt.Sprintf("The %s is %s, not at %s.", entity(p.PlayerID), where, p.FromLocationID), elsewhere: true})
		}
		if to, ok := f.exits[p.Direction]; f.exists[p.FromLocationID] && !ok {
			out = append(out, violation{sentence: fmt.Sprintf("The %s has no exit %s.", entity(p.FromLocationID), p.Direction)})
		} else if ok && to != p.ToLocationID {
			out = append(out, violation{sentence: fmt.Sprintf("The exit %s of %s leads to %s, not %s.", p.Direction, p.FromLocationID, to, p.ToLocationID)})
		}
	case *events.ExitAddedPayload:
		if p.FromLocationID == p.ToLocationID {
			out = append(out, violation{sentence: fmt.Sprintf("The exit %s of %s would lead back to itself: exits must connect two different locations.", p.Direction, p.FromLocationID)})
		}
		if to, ok := f.exits[p.Direction]; ok {
			out = append(out, violation{sentence: fmt.Sprintf("The %s already has an exit %s (to %s): exit directions are unique per location.", entity(p.FromLocationID), p.Direction, to)})
		}
	case *events.ExitRemovedPayload:
		if _, ok := f.exits[p.Direction]; f.exists[p.FromLocationID] && !ok {
			out = append(out, violation{sentence: fmt.Sprintf("The %s has no exit %s to remove.", entity(p.FromLocationID), p.Direction)})
		}
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (g *invariant) Check(ctx context.Context, p *events.Proposal) (Decision, error) {
	payload, err := events.DecodePayload(p.Kind, p.Payload)
	if err != nil {
		return Decision{}, err
	}
	n := needsOf(payload)
	n.marker = events.MarkerID(events.DomainEventID(p.ProposalID, 0))
	deadline := time.Now().Add(g.cfg.ReferenceWait)
	for {
		f, err := g.facts(ctx, n)
		if err != nil {
			return Decision{}, fmt.Errorf("graph unavailable: %w", err)
		}
		if f.decided {
			// It came back after it was decided (a redelivery of a committed move, say): its
			// rules no longer hold against the world it changed, and nothing waits for it.
			return Settle("the event-processor decided its event already (apply-once marker " + n.marker + ")"), nil
		}
		vs := invariantRules(p.Kind, payload, f)
		if len(vs) == 0 {
			g.passed(p.ProposalID, payload)
			return Pass(), nil
		}
		if g.afterPassedMove(ctx, payload, f, vs) {
			return Decision{}, runtime.Later(errPreviousMove)
		}
		waitable := true
		sentences := make([]string, len(vs))
		for i, v := range vs {
			sentences[i] = v.sentence
			waitable = waitable && v.waitable
		}
		reason := strings.Join(sentences, " ")
		details := map[string]any{"violations": sentences}
		if !waitable {
			return Reject(events.CodeInvariantViolation, reason, details), nil
		}
		if !time.Now().Before(deadline) {
			return RejectTransient(events.CodeInvariantViolation, reason+" It may be created by a proposal not committed yet: propose this again once it is.",
				details, 5), nil
		}
		select {
		case <-ctx.Done():
			return Decision{}, ctx.Err()
		case <-time.After(g.cfg.PollInterval):
		}
	}
}

// passed remembers a move the gate passed.
func (g *invariant) passed(proposal string, payload events.Payload) {
	if m, ok := payload.(*events.PlayerMovedPayload); ok {
		g.moves.Add(m.PlayerID, passedMove{proposal: proposal, from: m.FromLocationID, to: m.ToLocationID, at: time.Now()})
	}
}

// RefusedLater forgets p if it is its player's last passed move: a later gate of the run refused
// it for good, so the player's next move must not wait for it.
func (g *invariant) RefusedLater(_ context.Context, p *events.Proposal) error {
	if p.Kind != events.KindPlayerMoved {
		return nil
	}
	payload, err := events.DecodePayload(p.Kind, p.Payload)
	if err != nil {
		return nil // never passed: nothing remembered
	}
	if m, ok := payload.(*events.PlayerMovedPayload); ok {
		if prev, found := g.moves.Peek(m.PlayerID); found && prev.proposal == p.ProposalID {
			g.moves.Remove(m.PlayerID)
		}
	}
	return nil
}

// afterPassedMove reports whether a move refused only because its player is elsewhere should be
// decided again later instead: it starts where the player's last passed move ends, the graph
// still has the player where that move starts, and this is not the message's last delivery.
func (g *invariant) afterPassedMove(ctx context.Context, payload events.Payload, f facts, vs []violation) bool {
	m, ok := payload.(*events.PlayerMovedPayload)
	if !ok {
		return false
	}
	for _, v := range vs {
		if !v.elsewhere {
			return false
		}
	}
	prev, ok := g.moves.Get(m.PlayerID)
	if !ok || prev.to != m.FromLocationID || !contains(f.playerAt, prev.from) || time.Since(prev.at) > moveRemembered {
		return false
	}
	n, limit := Delivery(ctx)
	return n < limit
}

// facts reads what needs asks for in one traversal, which it may share with the checks running
// at the same moment (read): each referenced vertex that exists, with its exits and where it
// is. A move's check is one graph round trip, not three.
func (g *invariant) facts(ctx context.Context, n needs) (facts, error) {
	f := facts{exists: map[string]bool{}, exits: map[string]string{}}
	ids := make([]any, 0, len(n.ids)+1)
	for _, id := range n.ids {
		ids = append(ids, id)
	}
	if n.marker != "" {
		ids = append(ids, n.marker)
	}
	if len(ids) == 0 {
		return f, nil
	}
	rows, err := g.reads.Do(ctx, ids)
	if err != nil {
		return f, err
	}
	for _, id := range ids {
		m, ok := rows[id.(string)]
		if !ok {
			continue
		}
		id := m.String("id")
		if id == n.marker {
			f.decided = true
			continue
		}
		f.exists[id] = true
		if id == n.exitsOf {
			for _, e := range list(m["exits"]) {
				if em, ok := graphx.AsProps(e); ok {
					f.exits[em.String("direction")] = em.String("to")
				}
			}
		}
		var at []string
		for _, l := range list(m["at"]) {
			at = append(at, fmt.Sprint(l))
		}
		if id == n.playerOf {
			f.playerAt = at
		}
		if id == n.npcOf {
			f.npcAt = at
		}
	}
	return f, nil
}

// read reads the vertices each of several checks needs in one traversal: each that exists, by
// id, with its exits and where it is. Every check gets the same map (read only). A read the
// graph refuses is made again one check at a time, so one check's refusal is its own.
func (g *invariant) read(ctx context.Context, checks [][]any) []groupcommit.Result[map[string]graphx.Props] {
	out := make([]groupcommit.Result[map[string]graphx.Props], len(checks))
	var ids []any
	seen := map[any]bool{}
	for _, c := range checks {
		for _, id := range c {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	rows, err := g.readIDs(ctx, ids)
	if err != nil && len(checks) > 1 && !graphx.IsTransport(err) {
		for i, c := range checks {
			out[i].Value, out[i].Err = g.readIDs(ctx, c)
		}
		return out
	}
	for i := range out {
		out[i].Value, out[i].Err = rows, err
	}
	return out
}

// readIDs reads the vertices ids that exist, by id.
func (g *invariant) readIDs(ctx context.Context, ids []any) (map[string]graphx.Props, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := g.graph.Submit(ctx, func(gt *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return gt.V(ids...).Project("id", "exits", "at").
			By(gremlingo.T.Id).
			By(gremlingo.T__.OutE("exit").Project("direction", "to").By("direction").By(gremlingo.T__.InV().Id()).Fold()).
			By(gremlingo.T__.Out("at").Id().Fold())
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]graphx.Props, len(rows))
	for _, r := range rows {
		m, ok := graphx.AsProps(r)
		if !ok {
			return nil, fmt.Errorf("invariant facts: unexpected row %T", r)
		}
		out[m.String("id")] = m
	}
	return out, nil
}

// list is a folded traversal's value as a slice (nil for anything else).
func list(v any) []any {
	l, _ := v.([]any)
	return l
}
