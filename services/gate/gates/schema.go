package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/worldgate/worldgate/events"
)

// schema checks the proposal and its payload against the versioned JSON Schema (strict: unknown
// fields rejected), then the struct rules JSON Schema cannot express, then that the proposal's
// route is the one configured for its kind (so no emitter can skip a gate).
type schema struct {
	routes *events.Routes
}

// Schema is the schema gate's name.
const Schema = events.GateSchema

// schemaGate declares the schema gate (see Spec).
var schemaGate = Spec{
	Name: Schema, New: newSchema,
	Summary: "the proposal and its payload against the versioned JSON Schemas; the emitter may propose the kind",
}

func newSchema(_ context.Context, d Deps) (Gate, error) { return &schema{routes: d.Routes}, nil }

func (*schema) Name() string { return Schema }

// Check is CheckRaw on the encoded proposal (a dry run calls it; the runtime calls CheckRaw).
func (s *schema) Check(ctx context.Context, p *events.Proposal) (Decision, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return Decision{}, fmt.Errorf("encode proposal %s: %w", p.ProposalID, err)
	}
	return s.CheckRaw(ctx, data, p)
}

// CheckRaw validates data, the proposal as it arrived, and that the emitter named by the
// subject it arrived on may propose its kind. With data nil, p was decoded strictly already
// (events.Decoder.Proposal: the JSON Schemas passed) and only the rest is checked.
func (s *schema) CheckRaw(ctx context.Context, data []byte, p *events.Proposal) (Decision, error) {
	if d, ok := emitterRule(Subject(ctx), p); !ok {
		return d, nil
	}
	if data != nil {
		strict, err := events.Decoder{}.Proposal(data)
		if err != nil {
			return schemaRejection(err), nil
		}
		*p = *strict
	}
	if probs := append(proposalRules(p), trailRule(p)...); len(probs) > 0 {
		return schemaRejection(&events.InvalidError{What: "proposal", Problems: probs}), nil
	}
	emitter, _ := events.EmitterOf(Subject(ctx))
	return routeRule(s.routes, emitter, p), nil
}

// proposalRules are the rules beyond JSON Schema: the payload's struct rules, that its text is
// plain text (plaintext.go), and that a destructive kind asks for approval.
func proposalRules(p *events.Proposal) []events.Problem {
	var probs []events.Problem
	info, ok := events.LookupKind(p.Kind)
	if !ok {
		return []events.Problem{{Code: events.ProblemUnknownType, Path: "/kind", Message: fmt.Sprintf("unknown proposal kind %q", p.Kind)}}
	}
	if info.Destructive && !p.RequiresApproval {
		probs = append(probs, events.Problem{Code: events.ProblemInvalidField, Path: "/requiresApproval",
			Message: fmt.Sprintf("must be true: %s is destructive and waits for a person's approval", p.Kind)})
	}
	payload, err := events.DecodePayload(p.Kind, p.Payload)
	if err != nil {
		return append(probs, events.Problem{Code: events.ProblemInvalidPayload, Path: "/payload", Message: err.Error()})
	}
	probs = append(probs, events.PayloadRules(payload, "/payload")...)
	return append(probs, plainTextProblems(payload, "/payload")...)
}

// trailRule: a new proposal (it arrives on its emitter's subject) carries an empty trail, since
// the gates write it as they decide; its pending gates are checked against the configured route
// by routeRule. Hops an emitter wrote would sit in the trail as if gates had decided them.
func trailRule(p *events.Proposal) []events.Problem {
	if len(p.Route.Trail) == 0 {
		return nil
	}
	return []events.Problem{{Code: events.ProblemInvalidField, Path: "/route/trail",
		Message: fmt.Sprintf("must be empty on a new proposal (the gates write the trail as they decide), but it came with %d hop(s), the first said to be the %s gate's",
			len(p.Route.Trail), p.Route.Trail[0].Gate)}}
}

// emitterRule admits a proposal only from an emitter subject (proposals.emit.<emitter>, which
// only that emitter's NATS user may publish to) whose emitter may propose its kind, and whose
// agentRole is that emitter (world files and operators: world-loader or operator).
func emitterRule(subject string, p *events.Proposal) (Decision, bool) {
	emitter, ok := events.EmitterOf(subject)
	if !ok {
		return Reject(events.CodeRouteInvalid, fmt.Sprintf("The proposal arrived on %s: new proposals enter on proposals.emit.<emitter>, the subject of the role that proposes them (the only subject its NATS user may propose on).", subject),
			map[string]any{"subject": subject}), false
	}
	if !events.EmitterMay(emitter, p.Kind) {
		return Reject(events.CodeRouteInvalid, fmt.Sprintf("The %s emitter may not propose %s proposals (it may propose %s).", emitter, p.Kind, listOf(events.EmitterKinds(emitter))),
			map[string]any{"emitter": emitter, "kind": p.Kind}), false
	}
	builders := []string{events.EmitterWorldLoader, events.EmitterOperator}
	if p.AgentRole != emitter && !(slices.Contains(builders, emitter) && slices.Contains(builders, p.AgentRole)) {
		return Reject(events.CodeRouteInvalid, fmt.Sprintf("The proposal says agentRole %q but came from the %s emitter's subject.", p.AgentRole, emitter),
			map[string]any{"emitter": emitter, "agentRole": p.AgentRole}), false
	}
	return Decision{}, true
}

// routeRule checks that the proposal, at the schema gate, carries its kind's configured route
// (the narrator's route of it when the narrator emitter proposed it: safety, no replay), and
// that a narrator's proposal says so in its provenance and carries no model fields, while no
// other emitter's does.
func routeRule(routes *events.Routes, emitter string, p *events.Proposal) Decision {
	if d, ok := narrationRule(emitter, p); !ok {
		return d
	}
	want, err := routes.ForEmitter(emitter, p.Kind)
	if err != nil {
		return Reject(events.CodeRouteInvalid, fmt.Sprintf("No route is configured for proposal kind %s.", p.Kind), nil)
	}
	if !slices.Equal(p.Route.Pending, want) {
		if emitter == events.EmitterNarrator {
			return Reject(events.CodeRouteInvalid,
				fmt.Sprintf("A narrator's %s proposal must pass %s (its kind's route with safety and without replay: a person wrote it, there is nothing to regenerate), but its route lists %s.",
					p.Kind, strings.Join(want, " → "), strings.Join(p.Route.Pending, " → ")),
				map[string]any{"want": want, "got": p.Route.Pending, "emitter": emitter})
		}
		return Reject(events.CodeRouteInvalid,
			fmt.Sprintf("A %s proposal must pass %s, but its route lists %s: fill Route.Pending from the configured route (route.Default().For(kind)).",
				p.Kind, strings.Join(want, " → "), strings.Join(p.Route.Pending, " → ")),
			map[string]any{"want": want, "got": p.Route.Pending})
	}
	return Pass()
}

func schemaRejection(err error) Decision {
	var inv *events.InvalidError
	if !errors.As(err, &inv) {
		return Reject(events.CodeSchemaInvalid, "The proposal is not valid: "+err.Error(), nil)
	}
	problems := make([]map[string]any, len(inv.Problems))
	paths := make([]string, 0, len(inv.Problems))
	for i, pr := range inv.Problems {
		problems[i] = map[string]any{"path": pr.Path, "code": string(pr.Code), "message": pr.Message}
		if !slices.Contains(paths, pr.Path) {
			paths = append(paths, pr.Path)
		}
	}
	first := inv.Problems
	if len(first) > 3 {
		first = first[:3]
	}
	msgs := make([]string, len(first))
	for i, pr := range first {
		msgs[i] = pr.String()
	}
	reason := fmt.Sprintf("The proposal does not match schema v%s: %s", events.ProposalSchemaVersion, strings.Join(msgs, "; "))
	if n := len(inv.Problems) - len(first); n > 0 {
		reason += fmt.Sprintf(" (and %d more)", n)
	}
	return Reject(events.CodeSchemaInvalid, reason+".", map[string]any{"paths": paths, "problems": problems})
}

// narrationRule: a proposal from the narrator emitter carries provenance.narrator (the client
// mcp-propose authenticated) and no model fields; no other emitter's carries provenance.narrator.
func narrationRule(emitter string, p *events.Proposal) (Decision, bool) {
	pv := p.Provenance
	if emitter != events.EmitterNarrator {
		if pv != nil && pv.Narrator != nil {
			return Reject(events.CodeRouteInvalid, fmt.Sprintf("Only the narrator emitter's proposals carry provenance.narrator; this one came from the %s emitter.", emitter),
				map[string]any{"emitter": emitter}), false
		}
		return Decision{}, true
	}
	if pv == nil || pv.Narrator == nil || strings.TrimSpace(pv.Narrator.Client) == "" {
		return Reject(events.CodeRouteInvalid, "A narrator's proposal must say who wrote it: provenance.narrator with the client mcp-propose authenticated.", nil), false
	}
	var model []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"provider", pv.Provider != ""}, {"model", pv.Model != ""}, {"promptTemplate", pv.PromptTemplate != nil},
		{"contextHash", pv.ContextHash != ""}, {"toolCalls", len(pv.ToolCalls) > 0}, {"tokens", pv.Tokens != (events.Tokens{})},
		{"costUsd", pv.CostUSD != 0}, {"temperature", pv.Temperature != 0}, {"seed", pv.Seed != 0}, {"latencyMs", pv.LatencyMs != 0},
		{"cacheHit", pv.CacheHit}, {"fallback", pv.Fallback != ""}, {"inputRail", pv.InputRail != nil},
	} {
		if f.set {
			model = append(model, f.name)
		}
	}
	if len(model) > 0 {
		return Reject(events.CodeRouteInvalid, "A narrator's proposal carries no model fields (a person or an outside agent wrote it), but its provenance has "+strings.Join(model, ", ")+".",
			map[string]any{"fields": model}), false
	}
	return Decision{}, true
}
