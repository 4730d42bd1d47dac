package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/ai-worker/agent"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/scripted"
	"github.com/worldgate/worldgate/shared/actorpolicy"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// A player cooling down after a strike gets fallback content whose reason, which the outcome
// carries to the game client, says what the player may do and names no budget, amount, actor
// or strike; the operator still gets the refusal (the downgrade header worldgate trace
// shows). Before, the reason was the ledger's refusal: "budget per-player of player:bram …
// used $… of $…; actor player:bram cools down until …: repeat offender: strike 1 …".
func TestBudgetFallbackReasonIsForThePlayer(t *testing.T) {
	e := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := natsx.Provision(ctx, e.JS, natsx.DefaultTopology(natsx.TopologyOptions{}), logx.Discard()); err != nil {
		t.Fatal(err)
	}
	b, err := budget.OpenBuckets(ctx, e.JS)
	if err != nil {
		t.Fatal(err)
	}
	const strike = "repeat offender: strike 1, 3 flagged utterances within 1h0m0s (harassment, threat)"
	if err := actorpolicy.Set(ctx, b.Control, actorpolicy.Policy{Actor: "player:bram", Multiplier: 0.5, Strikes: 1,
		CoolDownUntil: time.Now().Add(10 * time.Minute), Reason: strike, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cfg := &budget.Config{Budgets: []budget.Budget{{Name: "per-player", Scope: budget.ScopeActor, Window: budget.Hour, USD: 0.05}}}
	ledger, err := budget.NewLedger(ctx, b, cfg, budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ledger.Close)
	reg, err := llm.NewRegistry(llmsetup.DefaultConfig(), llm.WithProviders(scripted.New(scripted.Options{})),
		llm.WithAdmitter(ledger), llm.WithLogger(logx.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{LLM: reg, Tools: groundingTools{}, Cache: &memCache{m: map[string][]byte{}}, Routes: route.Default(),
		Metrics: agent.NewMetrics(prometheus.NewRegistry()), Logger: logx.Discard(), Rail: agent.RailConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.NewEnvelope(events.PlayerSpokeToNPC, "test", events.Actor{Kind: "player", ID: "player:bram"},
		events.PlayerSpokeToNPCPayload{PlayerID: "player:bram", NPCID: "npc:oren", LocationID: "loc:tavern", Utterance: "Any news from the mines?"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ag.Handle(ctx, roles.MustLookup(roles.NPCDialogue), env)
	if err != nil {
		t.Fatal(err)
	}
	if res.Proposal == nil || res.Proposal.Provenance.Fallback == "" {
		t.Fatalf("want fallback content, got %+v", res)
	}
	player := events.CommittedOutcome(res.Proposal, events.DomainEvent{}).FallbackReason
	for _, internal := range []string{"per-player", "player:bram", "$", "strike", "harassment", "cools down", "budget "} {
		if strings.Contains(player, internal) {
			t.Errorf("the player-facing reason %q carries %q", player, internal)
		}
	}
	if !strings.Contains(player, "try again later") {
		t.Errorf("the player-facing reason %q does not say what the player may do", player)
	}
	if !strings.Contains(res.Downgrade, "cools down until") || !strings.Contains(res.Downgrade, strike) {
		t.Errorf("the operator's detail (downgrade header) lacks the refusal: %q", res.Downgrade)
	}
}

// groundingTools lists the tools the roles require; this test's calls are refused before any
// tool is called.
type groundingTools struct{}

func (groundingTools) Tools([]string) []client.Tool {
	schema := json.RawMessage(`{"type":"object"}`)
	return []client.Tool{{Server: "world", Name: "get-location", InputSchema: schema, ReadOnly: true},
		{Server: "lore", Name: "search-lore", InputSchema: schema, ReadOnly: true}}
}

func (groundingTools) Call(_ context.Context, tool string, _ any) (*client.Result, error) {
	return nil, &client.Error{Kind: client.KindToolError, Tool: tool, Message: "not served in this test"}
}

type memCache struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (c *memCache) Get(_ context.Context, k string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v, nil
	}
	return nil, agent.ErrMiss
}

func (c *memCache) Put(_ context.Context, k string, v []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = v
	return nil
}
