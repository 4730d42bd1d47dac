package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/provenance"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/telemetry"
)

// Rules provenance: the deterministic world-rules agent has no model; it records itself.
const (
	RulesProvider = "rules"
	RulesModel    = "world-rules@1.0.0"
)

type exitsResult struct {
	LocationID string `json:"locationId"`
	Exits      []struct {
		Direction string `json:"direction"`
		To        string `json:"to"`
	} `json:"exits"`
}

// resolveMove is the world-rules policy: a move request becomes a player_moved proposal when
// the origin has an exit in that direction. When it has none (or the location is unknown, or
// the direction is not one the contract knows) nothing is proposed: the move did not happen,
// which the game sees as the absence of a committed PlayerMoved; the refusal is logged with
// its reason (World.Move.Refused). When the world server cannot be reached the trigger is
// handed back for redelivery: a move is not content that can fall back to a static default.
func (a *Agent) resolveMove(ctx context.Context, role roles.Role, env *events.Envelope, in roles.Input) (*Result, error) {
	mv := in.Move
	refuse := func(reason string) (*Result, error) {
		a.m.tasks.WithLabelValues(role.Name, "refused").Inc()
		a.logger(ctx).Info(telemetry.MoveRefused, "correlationId", env.CorrelationID, telemetry.DimRole, role.Name,
			"playerId", mv.PlayerID, "fromLocationId", mv.FromLocationID, "direction", mv.Direction, "reason", reason)
		return &Result{Note: reason, Outcome: events.RequestRefused(env, role.Name, mv.FromLocationID, events.CodeMoveRefused, reason, a.cfg.Now())}, nil
	}
	dir := strings.ToLower(strings.TrimSpace(mv.Direction))
	if !roles.IsDirection(dir) {
		return refuse(fmt.Sprintf("%q is not a direction; use one of %s", mv.Direction, strings.Join(roles.Directions, ", ")))
	}
	start := time.Now()
	look, err := a.listExits(ctx, mv.FromLocationID, false)
	if err == nil && look.cached && look.to(dir) == "" {
		// A cached answer may predate the exit: ask the tool before refusing.
		look, err = a.listExits(ctx, mv.FromLocationID, true)
	}
	if err != nil {
		// Only an answer about the location refuses the move; any other tool error (the world
		// server could not reach the graph) hands the trigger back like an unreachable server,
		// or the move would be dropped by an outage.
		if client.KindOf(err) == client.KindToolError && isAnswer(toolErrorText(err)) {
			return refuse("the origin location cannot be read: " + toolErrorText(err))
		}
		return nil, fmt.Errorf("list the exits of %s: %w", mv.FromLocationID, err)
	}
	t := &task{role: role, env: env, in: in, executed: 1, latency: time.Since(start), calls: []events.ToolCall{look.call}}
	to := look.to(dir)
	if to == "" {
		return refuse(fmt.Sprintf("%s has no exit %s", mv.FromLocationID, dir))
	}
	payload, err := json.Marshal(&events.PlayerMovedPayload{PlayerID: mv.PlayerID, FromLocationID: mv.FromLocationID, ToLocationID: to, Direction: dir})
	if err != nil {
		return nil, err
	}
	if err := events.ValidatePayload(role.Kind, payload); err != nil {
		return refuse("the resolved move is not a valid player_moved: " + err.Error())
	}
	ch, err := provenance.ContextHash(string(role.Purpose), "", provenance.ToolResults(t.calls), RulesModel)
	if err != nil {
		return nil, err
	}
	prov := &events.Provenance{Provider: RulesProvider, Model: RulesModel, ContextHash: ch, ToolCalls: t.calls,
		LatencyMs: float64(t.latency.Microseconds()) / 1000}
	r, err := a.propose(ctx, t, payload, prov)
	if err != nil {
		return nil, err
	}
	a.m.toolCalls.WithLabelValues(string(role.Purpose)).Observe(1)
	a.m.tasks.WithLabelValues(role.Name, "proposed").Inc()
	a.logger(ctx).Info(telemetry.MoveProposed, "correlationId", env.CorrelationID, "proposalId", r.Proposal.ProposalID,
		telemetry.DimRole, role.Name, "playerId", mv.PlayerID, "fromLocationId", mv.FromLocationID, "toLocationId", to, "direction", dir)
	return r, nil
}

// isAnswer reports whether a tool error is the tool's answer about its input (mcpx.NotFound,
// mcpx.InvalidInput), as opposed to a failure of the server behind it.
func isAnswer(text string) bool {
	return strings.HasPrefix(text, "not found:") || strings.HasPrefix(text, "invalid input:")
}

type recentEvents struct {
	Events []struct {
		Type         string `json:"type"`
		CommittedUtc string `json:"committedUtc"`
	} `json:"events"`
}

// freshAmbience reports (as a reason) that the location's ambience was committed recently
// enough that it needs none, and how long it stays fresh; "" means generate. It is one policy
// read before the task, not a call on the model's behalf; if it fails, ambience is generated
// (the dedup gate still stops a near-copy).
func (a *Agent) freshAmbience(ctx context.Context, role roles.Role, locationID string) (string, time.Duration) {
	if a.cfg.AmbienceFreshFor < 0 || !role.Allows("list-recent-events") {
		return "", 0
	}
	res, err := a.cfg.Tools.Call(ctx, "list-recent-events", map[string]any{"entityId": locationID, "limit": 20})
	if err != nil {
		a.logger(ctx).Debug("ambience freshness check failed; generating", "locationId", locationID, "error", err.Error())
		return "", 0
	}
	var out recentEvents
	if err := res.Decode(&out); err != nil {
		return "", 0
	}
	now := a.cfg.Now()
	for _, e := range out.Events {
		if e.Type != "AmbienceGenerated" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, e.CommittedUtc)
		if age := now.Sub(at); err == nil && age < a.cfg.AmbienceFreshFor {
			return fmt.Sprintf("%s has ambience committed %s ago (fresh for %s): none is generated until then", locationID, age.Round(time.Second), a.cfg.AmbienceFreshFor),
				a.cfg.AmbienceFreshFor - age
		}
	}
	return "", 0
}
