package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/worldgate/worldfile"
)

// Mixes of world events a load can send.
const (
	// MixMoves is Player.MoveRequested only: the world-rules agent (no LLM, one MCP call) and
	// the route schema → invariant → rate → audit.
	MixMoves = "moves"
	// MixAI alternates Player.SpokeToNPC (npc-dialogue) and Quest.SeedRequested
	// (quest-planner): MCP tools, the scripted model, and every gate.
	MixAI = "ai"
	// MixMixed is nine moves to one AI event.
	MixMixed = "mixed"
)

// Mixes lists the mixes.
var Mixes = []string{MixMoves, MixAI, MixMixed}

// Hops is how many consume → publish steps a mix's proposals pass from the world event to the
// committed event: the agent, each gate of the route, the event-processor.
func Hops(mix string) float64 {
	switch mix {
	case MixMoves:
		return 6 // ai-worker, schema, invariant, rate, audit, event-processor
	case MixAI:
		return 9 // ai-worker, schema, safety, invariant, dedup, replay, rate, audit, event-processor
	}
	return 0.9*6 + 0.1*9
}

// Generator builds the run's world events. Event i goes to player i mod Players. A move starts
// where the player stands (Where: RoomA until its first committed move) and crosses to the
// other room, so a player whose previous move is decided always moves from the right room,
// and one rejected move does not put every later move of that player out of step.
//
// A player whose previous move is not decided yet (it is slow, or held by a killed process) is
// moved from where it stood before that move: the game proposes from what it knows, and once the
// previous move commits this one starts where the player no longer is, and is rightly refused.
// The same holds for any earlier move not seen decided yet: one committed late, after the
// player's next move was refused, leaves Where behind until its outcome arrives. With Undecided
// set, the generator remembers such moves (Stale), so a run can tell those refusals from
// refusals of moves proposed from where the player was.
type Generator struct {
	Mix       string
	Players   int
	Prefix    string                     // correlation ids and idempotency keys: Prefix + i
	Where     func(player string) string // where a player stands now; nil: always RoomA
	Undecided func(corr string) bool     // whether the event with correlation id corr is undecided
	npcs      []worldfile.NPC

	mu      sync.Mutex
	last    map[string]string   // player → correlation id of its last move generated
	pending map[string][]string // player → its moves not seen decided when it last moved
	stale   map[string]bool     // correlation ids of moves generated while an earlier move of the player was undecided
	prev    map[string]string   // correlation id → that of the player's move generated before it
}

// Previous is the correlation id of the move its player was sent before the move corr ("" for
// its first).
func (g *Generator) Previous(corr string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.prev[corr]
}

// Stale reports whether the move with correlation id corr was generated while an earlier move of
// its player (the previous one, or one before it) was undecided (see Undecided).
func (g *Generator) Stale(corr string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stale[corr]
}

// noteMove records that the move corr of player was generated now.
func (g *Generator) noteMove(player, corr string) {
	if g.Undecided == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == nil {
		g.last, g.pending, g.stale, g.prev = map[string]string{}, map[string][]string{}, map[string]bool{}, map[string]string{}
	}
	if prev := g.last[player]; prev == corr {
		return // the same event again (a publish retry)
	} else if prev != "" {
		g.prev[corr] = prev
	}
	left := g.pending[player][:0]
	for _, c := range g.pending[player] {
		if g.Undecided(c) {
			left = append(left, c)
		}
	}
	if len(left) > 0 {
		g.stale[corr] = true
	}
	g.pending[player] = append(left, corr)
	g.last[player] = corr
}

// NewGenerator checks the mix.
func NewGenerator(mix string, players int, prefix string) (*Generator, error) {
	if players <= 0 {
		return nil, fmt.Errorf("players must be positive, not %d", players)
	}
	demo, err := worldfile.DemoWorld()
	if err != nil {
		return nil, err
	}
	switch mix {
	case MixMoves, MixAI, MixMixed:
	default:
		return nil, fmt.Errorf("unknown mix %q: use one of %v", mix, Mixes)
	}
	return &Generator{Mix: mix, Players: players, Prefix: prefix, npcs: demo.NPCs}, nil
}

// CorrelationID of event i.
func (g *Generator) CorrelationID(i int) string { return fmt.Sprintf("%s%d", g.Prefix, i) }

// Event returns event i (its type and encoded envelope).
func (g *Generator) Event(i int) (string, []byte, error) {
	player := i % g.Players
	ai := g.Mix == MixAI || (g.Mix == MixMixed && i%10 == 9)
	var typ string
	var payload any
	switch {
	case !ai:
		from := RoomA
		if g.Where != nil {
			if w := g.Where(PlayerID(player)); w != "" {
				from = w
			}
		}
		typ = events.PlayerMoveRequested
		g.noteMove(PlayerID(player), g.CorrelationID(i))
		if from == RoomA {
			payload = events.PlayerMoveRequestedPayload{PlayerID: PlayerID(player), FromLocationID: RoomA, Direction: "north"}
		} else {
			payload = events.PlayerMoveRequestedPayload{PlayerID: PlayerID(player), FromLocationID: RoomB, Direction: "south"}
		}
	case g.aiIndex(i)%2 == 0:
		npc := g.npcs[i%len(g.npcs)]
		typ = events.PlayerSpokeToNPC
		payload = events.PlayerSpokeToNPCPayload{PlayerID: PlayerID(player), NPCID: npc.ID, LocationID: npc.Location,
			Utterance: fmt.Sprintf("What news of the mountain, friend? I have walked %d leagues.", i)}
	default:
		npc := g.npcs[i%len(g.npcs)]
		typ = events.QuestSeedRequested
		payload = events.QuestSeedRequestedPayload{LocationID: npc.Location, PlayerID: PlayerID(player), Theme: fmt.Sprintf("omen %d", i)}
	}
	env, err := events.NewEnvelope(typ, "worldgate-bench", events.Actor{Kind: "player", ID: PlayerID(player)}, payload)
	if err != nil {
		return "", nil, err
	}
	env.CorrelationID = g.CorrelationID(i)
	env.IdempotencyKey = env.CorrelationID
	data, err := json.Marshal(env)
	return typ, data, err
}

// aiIndex numbers the AI events: every one in "ai", every tenth in "mixed".
func (g *Generator) aiIndex(i int) int {
	if g.Mix == MixAI {
		return i
	}
	return i / 10
}

// Publisher sends events at a rate, or at saturation, keeping a bounded number of asynchronous
// publishes in flight.
//
// At saturation (Rate 0) every player sends its next event as soon as its previous one is
// decided, as a game client does: a player's second move sent before the first is committed
// would be refused (the invariant gate checks where the player stands). Throughput is then
// bounded by the pipeline, not by the players, as long as Players exceeds rate × latency.
type Publisher struct {
	JS       jetstream.JetStream
	Gen      *Generator
	Rate     float64  // events/s; 0: saturation
	Tracker  *Tracker // required at saturation
	InFlight int      // outstanding publishes; default 512

	Sent atomic.Int64
}

// Run publishes events from..to-1 and returns when every one is acknowledged or ctx ends.
func (p *Publisher) Run(ctx context.Context, from, to int) error {
	inflight := p.InFlight
	if inflight <= 0 {
		inflight = 512
	}
	window := make(chan jetstream.PubAckFuture, inflight)
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for f := range window {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				errc <- fmt.Errorf("publish %s: %w", f.Msg().Header.Get(events.HeaderCorrelationID), err)
				for range window {
				}
				return
			case <-time.After(30 * time.Second):
				errc <- fmt.Errorf("publish %s: no acknowledgement within 30s", f.Msg().Header.Get(events.HeaderCorrelationID))
				for range window {
				}
				return
			}
			p.Sent.Add(1)
		}
	}()
	start := time.Now()
	var err error
	for i := from; i < to; i++ {
		if p.Rate > 0 {
			due := start.Add(time.Duration(float64(i-from) / p.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
		if p.Rate == 0 && i-p.Gen.Players >= from {
			if err = p.Tracker.WaitDecided(ctx, p.Gen.CorrelationID(i-p.Gen.Players)); err != nil {
				break // ctx ended
			}
		}
		if ctx.Err() != nil {
			err = ctx.Err()
			break
		}
		var typ string
		var data []byte
		typ, data, err = p.Gen.Event(i)
		if err != nil {
			break
		}
		msg := &nats.Msg{Subject: events.Subject(typ), Data: data, Header: nats.Header{}}
		corr := p.Gen.CorrelationID(i)
		msg.Header.Set(events.HeaderCorrelationID, corr)
		msg.Header.Set(events.HeaderType, typ)
		var f jetstream.PubAckFuture
		f, err = p.JS.PublishMsgAsync(msg, jetstream.WithMsgID(corr))
		if err != nil {
			break
		}
		window <- f
	}
	close(window)
	if perr := <-errc; perr != nil {
		return perr
	}
	return err
}

// ReliablePublisher sends events at Rate like a game backend that must not lose one: each
// publish is retried with the same message id until JetStream acknowledges it (the WORLD
// stream drops a copy that did arrive), across NATS restarts.
type ReliablePublisher struct {
	JS      jetstream.JetStream
	Gen     *Generator
	Rate    float64 // events/s, > 0
	Workers int     // concurrent publishes; default 32

	Sent    atomic.Int64
	Retries atomic.Int64
}

// Run publishes events from..to-1 and returns when each is acknowledged or ctx ends.
func (p *ReliablePublisher) Run(ctx context.Context, from, to int) error {
	workers := p.Workers
	if workers <= 0 {
		workers = 32
	}
	todo := make(chan int)
	errc := make(chan error, workers)
	for range workers {
		go func() {
			var err error
			for i := range todo {
				if err != nil {
					continue
				}
				err = p.publish(ctx, i)
			}
			errc <- err
		}()
	}
	start := time.Now()
	for i := from; i < to; i++ {
		due := start.Add(time.Duration(float64(i-from) / p.Rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		todo <- i
	}
	close(todo)
	var first error
	for range workers {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	return first
}

func (p *ReliablePublisher) publish(ctx context.Context, i int) error {
	typ, data, err := p.Gen.Event(i)
	if err != nil {
		return err
	}
	corr := p.Gen.CorrelationID(i)
	for {
		msg := &nats.Msg{Subject: events.Subject(typ), Data: data, Header: nats.Header{}}
		msg.Header.Set(events.HeaderCorrelationID, corr)
		msg.Header.Set(events.HeaderType, typ)
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := p.JS.PublishMsg(pctx, msg, jetstream.WithMsgID(corr))
		cancel()
		if err == nil {
			p.Sent.Add(1)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.Retries.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Ahead is a Generator.Where for a flood of valid moves: where each player will stand once
// every move generated for it before has committed (RoomA first, then across and back). An
// outside client sending moves without waiting for outcomes sends these; each player's moves
// then queue behind each other at every ordered stage.
func Ahead() func(player string) string {
	var mu sync.Mutex
	next := map[string]string{}
	return func(player string) string {
		mu.Lock()
		defer mu.Unlock()
		from := next[player]
		if from == "" {
			from = RoomA
		}
		if from == RoomA {
			next[player] = RoomB
		} else {
			next[player] = RoomA
		}
		return from
	}
}
