package worldtools

import (
	"context"
	"errors"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/worldgate/worldgate/services/memory-writer/memory"
	"github.com/worldgate/worldgate/shared/mcpx"
)

// get-recent-dialogue limits.
const (
	MaxDialogueLimit     = 20
	DefaultDialogueLimit = 5
	// aroundNPC is how many of the NPC's recent events come with the dialogue.
	aroundNPC = 5
)

// RecentDialogueInput is get-recent-dialogue's input.
type RecentDialogueInput struct {
	NPCID    string `json:"npcId" jsonschema:"the NPC, e.g. npc:mira"`
	PlayerID string `json:"playerId" jsonschema:"the player, e.g. player:ada"`
	Limit    int    `json:"limit,omitempty" jsonschema:"at most this many exchanges, 1..20 (default 5)"`
}

// RecentDialogueOutput is get-recent-dialogue's output.
type RecentDialogueOutput struct {
	NPCID     string            `json:"npcId"`
	PlayerID  string            `json:"playerId"`
	Exchanges []memory.Exchange `json:"exchanges" jsonschema:"the pair's last committed exchanges, newest first; empty when they never spoke (or it was long ago)"`
	AroundNPC []memory.Note     `json:"aroundNpc" jsonschema:"the NPC's most recent committed events (with anyone), newest first"`
}

func (s *Server) getRecentDialogue(ctx context.Context, _ *mcp.CallToolRequest, in RecentDialogueInput) (*mcp.CallToolResult, RecentDialogueOutput, error) {
	var none RecentDialogueOutput
	if err := checkID("npcId", in.NPCID, "npc:"); err != nil {
		return nil, none, err
	}
	if err := checkID("playerId", in.PlayerID, "player:"); err != nil {
		return nil, none, err
	}
	limit := in.Limit
	if limit == 0 {
		limit = DefaultDialogueLimit
	}
	if limit < 1 || limit > MaxDialogueLimit {
		return nil, none, mcpx.InvalidInput("limit is %d; it must be between 1 and %d", in.Limit, MaxDialogueLimit)
	}
	// Unknown ids are an error, not an empty memory: the model asked about someone who is not
	// in the world.
	for _, c := range []struct{ id, label, what string }{{in.NPCID, "NPC", "NPC"}, {in.PlayerID, "Player", "player"}} {
		v, err := s.vertex(ctx, c.id, c.label)
		if err != nil {
			return nil, none, err
		}
		if v == nil {
			return nil, none, mcpx.NotFound("no %s with id %q", c.what, c.id)
		}
	}
	store, err := s.memory.get(ctx)
	if err != nil {
		return nil, none, err
	}
	d, err := store.Dialogue(ctx, in.NPCID, in.PlayerID)
	if err != nil {
		return nil, none, err
	}
	sm, err := store.Summary(ctx, in.NPCID)
	if err != nil {
		return nil, none, err
	}
	return nil, RecentDialogueOutput{NPCID: in.NPCID, PlayerID: in.PlayerID, Exchanges: d.Last(limit), AroundNPC: sm.Last(aroundNPC)}, nil
}

// lazyMemory opens the memory bucket at the first call (New dials nothing), and again after
// a failure.
type lazyMemory struct {
	s     *Server
	mu    sync.Mutex
	store *memory.Store
}

func (l *lazyMemory) get(ctx context.Context) (*memory.Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store != nil {
		return l.store, nil
	}
	if l.s.opts.JetStream == nil {
		return nil, errors.New("interaction memory is unavailable: this server has no NATS connection")
	}
	st, err := memory.Open(ctx, l.s.opts.JetStream, memory.Limits{})
	if err != nil {
		return nil, err
	}
	l.store = st
	return st, nil
}
