// Package agent is the ai-worker's task loop: from a trigger (a world event) to a proposal.
// For an LLM role it renders the role's prompt template, lets the model ask for MCP tools
// within a hard per-task budget, computes the context hash the replay gate recomputes, reuses
// a cached answer for the same context, validates the answer against the proposal kind's
// schema, and records complete provenance. When tools or the model fail it proposes static
// fallback content instead; it follows rejections of its proposals (reprompt, retry, fallback).
//
// It knows nothing of NATS subjects, acks or consumers: aiworker wires it to the runtime. It
// never writes to the world: tools are read-only and the result is only a proposal.
package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/fallback"
	"github.com/worldgate/worldgate/events/provenance"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/llm/prompt"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/telemetry"
)

// Defaults.
const (
	// DefaultToolBudget is the hard cap of MCP tool calls per task.
	DefaultToolBudget = 6
	// MaxReprompts is how many times a refused proposal is regenerated before fallback content.
	MaxReprompts = 2
	// DefaultAmbienceFreshFor: a location whose ambience was committed more recently than this
	// gets none.
	DefaultAmbienceFreshFor = 10 * time.Minute
	// maxRecordedCalls is the proposal schema's bound on provenance.toolCalls.
	maxRecordedCalls = 16
	// maxRounds bounds model turns per task (tool rounds plus the answer).
	maxRounds = 8
)

// ToolSource is the MCP side an agent needs; *client.Client implements it.
type ToolSource interface {
	Tools(allowList []string) []client.Tool
	Call(ctx context.Context, tool string, args any) (*client.Result, error)
}

// LLM is the provider layer an agent calls (llm.Provider; *llm.Registry in production).
type LLM = llm.Provider

// Routes gives a proposal kind's gates; events.Routes implements it.
type Routes interface {
	For(kind string) ([]string, error)
}

// Config holds an Agent's dependencies.
type Config struct {
	// LLM is the provider layer (an *llm.Registry). Required for LLM roles.
	LLM llm.Provider
	// Tools is the MCP client. Required.
	Tools ToolSource
	// Cache is the context-hash cache. Required.
	Cache Cache
	// Routes are the routes per kind. Required.
	Routes  Routes
	Metrics *Metrics // required
	Logger  *slog.Logger
	// Fallback is the fallback content table (default fallback.Default()).
	Fallback *fallback.Table
	// ToolBudget is the per-task tool call cap (default 6).
	ToolBudget int
	// AmbienceFreshFor (default 10 minutes; negative: never skip).
	AmbienceFreshFor time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Rail configures the input rail (the player's words moderated before any model call).
	Rail RailConfig
	// Exits caches world-rules' list-exits answers per location (nil: every move asks
	// mcp-world).
	Exits *ExitsCache
	// Reuse answers a reprompt's tool calls with what its refused attempt was told, when the
	// refusal was about the content (nil: every attempt asks the MCP servers).
	Reuse *ContextReuse
	// ShortCircuit answers a target whose requests keep ending in reuse with the accepted
	// content, without a model call, for a cooldown (nil: every request asks the model).
	ShortCircuit *ShortCircuit
	// Keyring holds the gates' public keys: a rejection is followed only when the hops before
	// the rejecting gate verify with them (nil: only refusals at a route's first gate can be).
	Keyring *attest.Keyring
}

// Agent runs tasks. It is safe for concurrent use.
type Agent struct {
	cfg Config
	log *slog.Logger
	m   *Metrics
}

// New returns an Agent; it refuses missing dependencies.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.Tools == nil:
		return nil, errors.New("agent: an MCP tool source is required")
	case cfg.Cache == nil:
		return nil, errors.New("agent: a cache is required")
	case cfg.Routes == nil:
		return nil, errors.New("agent: routes are required")
	case cfg.Metrics == nil:
		return nil, errors.New("agent: metrics are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Fallback == nil {
		cfg.Fallback = fallback.Default()
	}
	if cfg.ToolBudget <= 0 {
		cfg.ToolBudget = DefaultToolBudget
	}
	if cfg.AmbienceFreshFor == 0 {
		cfg.AmbienceFreshFor = DefaultAmbienceFreshFor
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Agent{cfg: cfg, log: cfg.Logger, m: cfg.Metrics}, nil
}

// Result is what handling a trigger or a rejection produced.
type Result struct {
	// Proposal to publish to Subject with message id MsgID; nil when there is nothing to propose.
	Proposal *events.Proposal
	Subject  string
	MsgID    string
	// NotBefore: publish no earlier than this (a transient rejection's retryAfter).
	NotBefore time.Time
	// Note says why nothing was proposed, or what was done.
	Note string
	// Downgrade: a budget moved the content to a cheaper tier ("rich→cheap: reason"), or
	// refused every tier ("every tier refused: reason"; the content is then fallback content,
	// whose player-facing reason names no budget). For operators only: the proposal's
	// downgrade header, which worldgate trace shows.
	Downgrade string
	// Outcome is the request's final outcome when this decision ends it (a refused move, a
	// proposal refused for good, an event the role decided not to act on); published to the
	// OUTCOMES stream.
	Outcome *events.Outcome
}

// namespace makes proposal ids Worldgate's own UUIDv5s.
var namespace = uuid.MustParse("3b0d2c1e-8f4a-5a7b-9c6d-2e1f0a9b8c7d")

// ProposalID is the deterministic id of a role's proposal for a trigger event at attempt n:
// attempt 0 is derived from the role and event, attempt n from attempt 0's id and n, so a
// redelivered trigger or rejection maps to the same proposal.
func ProposalID(role, eventID string, attempt int) string {
	root := uuid.NewSHA1(namespace, []byte("ai-worker/"+role+"/"+eventID)).String()
	if attempt == 0 {
		return root
	}
	return uuid.NewSHA1(namespace, fmt.Appendf(nil, "%s/attempt/%d", root, attempt)).String()
}

func sum(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func taskKey(role, eventID string) string { return "task." + sum(role, eventID)[:40] }

func railKey(role, eventID string) string { return "rail." + sum(role, eventID)[:40] }

// Generation is one model task: the role, its trigger and what the role took from it, and how
// the request is built. Handling a trigger or a rejection builds one, and so do replays and
// shadow runs (package replay), so that all of them send the model the same request for the
// same recorded context.
type Generation struct {
	Role    roles.Role
	Trigger *events.Envelope
	Input   roles.Input
	// Attempt is 0 for the first proposal of a trigger, n for its n-th reprompt.
	Attempt int
	// Rejection and Previous are a reprompt's feedback: the gate's refusal and the refused
	// payload (nil on attempt 0).
	Rejection *events.Rejection
	Previous  json.RawMessage
	// Template is the template version to render (nil: the newest version of the role's).
	Template *templates.Spec
	// Model pins the request to "provider:model" (empty: the purpose's tier decides).
	Model string
}

// Generate runs one generation as a trigger's handling would, without the input rail and the
// ambience freshness check (those decide whether to generate at all). Results are cached in
// the agent's Cache like any other: give a replay an agent of its own with a cache that
// never hits.
func (a *Agent) Generate(ctx context.Context, g Generation) (*Result, error) {
	ctx = mcpx.WithCorrelationID(ctx, g.Trigger.CorrelationID)
	return a.generate(ctx, g)
}

// Handle runs the role's task for one trigger event (decoded with events.DecodeEnvelope).
// An error means the trigger should be retried later (infrastructure: cache, context ended);
// every failure of tools or model becomes fallback content instead.
func (a *Agent) Handle(ctx context.Context, role roles.Role, env *events.Envelope) (*Result, error) {
	in, err := role.Input(env)
	if err != nil {
		return nil, err
	}
	ctx = mcpx.WithCorrelationID(ctx, env.CorrelationID)
	// Per-actor and per-location budgets charge the calls of this task to its subject.
	ctx = budget.WithSubject(ctx, budget.Subject{Actor: actorID(env.Actor), Location: in.LocationID})
	if !role.UsesLLM {
		return a.resolveMove(ctx, role, env, in)
	}
	if role.Kind == events.KindAmbience {
		if note, fresh := a.freshAmbience(ctx, role, in.LocationID); note != "" {
			a.m.tasks.WithLabelValues(role.Name, "skipped").Inc()
			a.logger(ctx).Info(telemetry.PromptSkipped, "correlationId", env.CorrelationID, telemetry.DimRole, role.Name,
				telemetry.DimPurpose, string(role.Purpose), "locationId", in.LocationID, "reason", note)
			// Not acting is a decision too: whoever awaits the event learns it, and when the
			// place may get new ambience, instead of waiting for nothing.
			return &Result{Note: note, Outcome: events.SkippedOutcome(env, role.Name, in.LocationID, events.CodeAmbienceFresh, note, fresh, a.cfg.Now())}, nil
		}
	}
	// The input rail: the player's words are moderated before any model reads them.
	res, env, err := a.inputRail(ctx, role, env, &in)
	if err != nil || res != nil {
		return res, err
	}
	if key := shortCircuitKey(role, in.Bind); key != "" {
		if r, ok := a.cfg.ShortCircuit.Decide(key, a.cfg.Now()); ok {
			// The target's recent requests kept ending in reuse: its accepted content answers
			// this one too, and no model is asked (ShortCircuit).
			a.m.tasks.WithLabelValues(role.Name, "reused").Inc()
			a.logger(ctx).Info(telemetry.PromptReused, "correlationId", env.CorrelationID, telemetry.DimRole, role.Name,
				telemetry.DimPurpose, string(role.Purpose), "reusedProposalId", r.ProposalID, "reusedEventId", r.EventID, "shortCircuit", true)
			return &Result{Note: NoteShortCircuited, Outcome: shortCircuited(env, role, in.LocationID, r, a.cfg.Now())}, nil
		}
	}
	// Keep the trigger for reprompts (redacted): a rejection carries the proposal, not the
	// player's words.
	raw, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	if err := a.cfg.Cache.Put(ctx, taskKey(role.Name, env.EventID), raw); err != nil {
		return nil, fmt.Errorf("remember the trigger for reprompts: %w", err)
	}
	if in.Rail != nil {
		rr, err := json.Marshal(in.Rail)
		if err != nil {
			return nil, err
		}
		if err := a.cfg.Cache.Put(ctx, railKey(role.Name, env.EventID), rr); err != nil {
			return nil, fmt.Errorf("remember the input rail for reprompts: %w", err)
		}
	}
	return a.generate(ctx, Generation{Role: role, Trigger: env, Input: in})
}

func (a *Agent) logger(ctx context.Context) *slog.Logger { return logx.From(ctx, a.log) }

// actorID is the actor as budgets key it ("player:ada"), whether or not its id names its kind.
func actorID(act events.Actor) string {
	if act.ID == "" || strings.HasPrefix(act.ID, act.Kind+":") {
		return act.ID
	}
	return act.Kind + ":" + act.ID
}

// task is the state of one generation.
type task struct {
	role     roles.Role
	env      *events.Envelope
	in       roles.Input
	attempt  int
	spec     templates.Spec
	calls    []events.ToolCall
	executed int
	usage    llm.Usage
	cost     float64
	latency  time.Duration
	budget   bool // the model asked for more calls than the budget
	repaired bool
	// downgrade: a spending budget moved a call to a cheaper tier (shown by worldgate trace).
	downgrade string
	// reuse: a reprompt after a refusal of the content; its tool calls may be answered from
	// the refused attempt's context (Config.Reuse).
	reuse bool
}

// generate runs one generation as a sequence of steps: pick the template, build the request,
// converse with the model (its tool calls answered through MCP, each turn cached), check the
// answer against the kind's contract (one repair reprompt), then propose it with its
// provenance. A step that cannot go on returns fallback content (done) or an error that
// retries the trigger later.
func (a *Agent) generate(ctx context.Context, g Generation) (*Result, error) {
	t := &task{role: g.Role, env: g.Trigger, in: g.Input, attempt: g.Attempt, reuse: reusable(g.Rejection)}
	spec, err := template(g)
	if err != nil {
		return nil, err
	}
	t.spec = spec
	if a.cfg.LLM == nil {
		return a.fallback(ctx, t, CauseLLMError, "no LLM provider is configured")
	}
	req, servers, done, err := a.request(ctx, t, g)
	if done != nil || err != nil {
		return done, err
	}
	c, done, err := a.converse(ctx, t, req, servers)
	if done != nil || err != nil {
		return done, err
	}
	payload, done, err := a.checkAnswer(ctx, t, req, c)
	if done != nil || err != nil {
		return done, err
	}
	prov, err := a.provenanceOf(t, c)
	if err != nil {
		return nil, err
	}
	return a.proposeAnswer(ctx, t, payload, prov)
}

// template is the generation's template: the version it names, else the newest of its role's.
func template(g Generation) (templates.Spec, error) {
	if g.Template != nil {
		return *g.Template, nil
	}
	spec, ok := templates.Get(g.Role.Template)
	if !ok {
		return templates.Spec{}, fmt.Errorf("role %s names template %q, which is not registered", g.Role.Name, g.Role.Template)
	}
	return spec, nil
}

// request renders the prompt (with a reprompt's feedback) and builds the model request with
// the role's MCP tools; servers maps each tool to its server. Missing required tools end the
// generation with fallback content.
func (a *Agent) request(ctx context.Context, t *task, g Generation) (_ *llm.Request, servers map[string]string, done *Result, _ error) {
	role, spec := t.role, t.spec
	schema, err := templates.OutputSchema(role.Kind)
	if err != nil {
		return nil, nil, nil, err
	}
	data := templates.Data{Facts: t.in.Facts, Untrusted: t.in.Untrusted}
	if rej := g.Rejection; rej != nil {
		r := prompt.Data("rejection_reason", fmt.Sprintf("%s gate, %s: %s", rej.Gate, rej.Code, rej.Reason))
		p := prompt.Data("previous_answer", string(g.Previous))
		data.Rejection, data.Previous = &r, &p
	}
	user, err := spec.Render(data)
	if err != nil {
		return nil, nil, nil, err
	}
	offered := a.cfg.Tools.Tools(role.Tools)
	if missing := missingTools(role.Required, offered); len(missing) > 0 {
		done, err := a.fallback(ctx, t, CauseToolsUnavailable,
			fmt.Sprintf("MCP tools %s are unavailable (their server is down or unreachable)", strings.Join(missing, ", ")))
		return nil, nil, done, err
	}
	servers = map[string]string{}
	tools := make([]llm.Tool, 0, len(offered))
	for _, tl := range offered {
		servers[tl.Name] = tl.Server
		tools = append(tools, llm.Tool{Name: tl.Name, Description: tl.Description, InputSchema: tl.InputSchema})
	}
	temp, seed := spec.Temperature, spec.Seed
	return &llm.Request{
		Purpose:     role.Purpose,
		Messages:    []llm.Message{{Role: llm.RoleUser, Content: user}},
		Tools:       tools,
		Output:      &llm.OutputSchema{Name: role.Kind, Description: "the " + role.Kind + " proposal payload", Schema: schema},
		Temperature: &temp, Seed: &seed, MaxTokens: spec.MaxTokens, Model: g.Model,
	}, servers, nil, nil
}

// conversation is where the model's turns ended.
type conversation struct {
	final    *turn  // the answer
	fromHit  bool   // the answer came from the cache
	liveTurn bool   // some turn called the model
	turnKey  string // the answer's cache key
}

// converse asks the model, answers its tool calls and asks again, up to maxRounds turns and
// the tool budget; each turn is looked up in the cache first (keyed by the context hash so
// far) and a tool request is cached too.
func (a *Agent) converse(ctx context.Context, t *task, req *llm.Request, servers map[string]string) (*conversation, *Result, error) {
	planned := a.plannedModel(req)
	inputDigest := sum(req.Messages[0].Content)
	c := &conversation{}
	for round := 0; round < maxRounds; round++ {
		if t.executed >= a.cfg.ToolBudget || round == maxRounds-1 {
			req.Tools = nil // nothing left to spend: the model must answer
		}
		ch, err := provenance.ContextHash(string(t.role.Purpose), t.spec.SHA256, provenance.ToolResults(t.calls), planned)
		if err != nil {
			return nil, nil, err
		}
		c.turnKey = "out." + sum(ch, inputDigest, fmt.Sprint(req.Tools != nil))[:48]
		tr, hit, err := a.cachedTurn(ctx, c.turnKey)
		if err != nil {
			return nil, nil, err
		}
		if !hit {
			var done *Result
			if tr, done, err = a.callModel(ctx, t, req); done != nil || err != nil {
				return nil, done, err
			}
			if len(tr.ToolCalls) > 0 && req.Tools != nil {
				// Tool requests are a function of the conversation so far: cache them too, so
				// that a task served from the cache spends no tokens at all.
				if err := a.putTurn(ctx, c.turnKey, tr); err != nil {
					return nil, nil, err
				}
			}
			c.liveTurn = true
		}
		if len(tr.ToolCalls) == 0 || req.Tools == nil {
			c.final, c.fromHit = tr, hit
			break
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: tr.Text, ToolCalls: tr.ToolCalls})
		down, err := a.runTools(ctx, t, tr.ToolCalls, servers, req)
		if err != nil {
			return nil, nil, err
		}
		if down != "" {
			done, err := a.fallback(ctx, t, CauseToolsUnavailable, down)
			return nil, done, err
		}
	}
	if c.final == nil || len(c.final.ToolCalls) > 0 && c.final.Text == "" {
		done, err := a.fallback(ctx, t, CauseInvalidOutput, "the model kept asking for tools and never answered")
		return nil, done, err
	}
	return c, nil, nil
}

// callModel makes one model call and accounts for it (tokens, cost, latency, budget
// downgrades). A failed call ends the generation with fallback content, unless the context
// ended (shutting down: the trigger is redelivered).
func (a *Agent) callModel(ctx context.Context, t *task, req *llm.Request) (*turn, *Result, error) {
	role, env := t.role, t.env
	resp, err := a.cfg.LLM.Complete(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		cause := CauseLLMError
		switch llm.KindOf(err) {
		case llm.KindInvalidOutput:
			cause = CauseInvalidOutput
		case llm.KindBudget:
			done, err := a.budgetFallback(ctx, t, err)
			return nil, done, err
		}
		done, err := a.fallback(ctx, t, cause, "the model failed after the provider layer's retries: "+err.Error())
		return nil, done, err
	}
	t.account(resp)
	t.repaired = t.repaired || resp.Repaired
	for _, d := range resp.Downgrades {
		a.m.downgrades.WithLabelValues(string(role.Purpose), d.From, d.To).Inc()
		a.logger(ctx).Warn(telemetry.BudgetDowngraded, "correlationId", env.CorrelationID, telemetry.DimRole, role.Name,
			telemetry.DimPurpose, string(role.Purpose), telemetry.DimTierFrom, d.From, telemetry.DimTierTo, d.To, telemetry.DimBudgetReason, d.Reason)
		if t.downgrade == "" {
			t.downgrade = d.From + "→" + d.To + ": " + d.Reason
		}
	}
	return &turn{Text: resp.Text, ToolCalls: resp.ToolCalls, Provider: resp.Provider, Model: resp.Model}, nil, nil
}

// BudgetFallbackReason is the reason fallback content carries when no model call could be
// paid for. It reaches the player (the outcome's fallbackReason), so it says what the player
// may do and names no budget, amount, actor or strike: the refusal itself is for operators,
// in the log (Prompt.Budget.Refused), the proposal's downgrade header (worldgate trace) and
// the metrics (worldgate_budget_refusals_total{budget,reason}).
const BudgetFallbackReason = "no model answer can be paid for right now; try again later"

// budgetFallback ends a task whose model call a budget refused: the refusal goes to the
// operators, the player gets fallback content with BudgetFallbackReason.
func (a *Agent) budgetFallback(ctx context.Context, t *task, refusal error) (*Result, error) {
	a.logger(ctx).Warn(telemetry.BudgetRefused, "correlationId", t.env.CorrelationID, telemetry.DimRole, t.role.Name,
		telemetry.DimPurpose, string(t.role.Purpose), telemetry.DimBudgetReason, refusal.Error())
	detail := "every tier refused: " + refusal.Error()
	if t.downgrade != "" {
		detail = t.downgrade + "; then " + detail
	}
	if len(detail) > 960 {
		detail = detail[:960] + "…"
	}
	t.downgrade = detail
	return a.fallback(ctx, t, CauseBudget, BudgetFallbackReason)
}

// account adds a model call's usage, cost and latency to the task.
func (t *task) account(resp *llm.Response) {
	t.usage = t.usage.Add(resp.Usage)
	t.cost += resp.CostUSD
	t.latency += resp.Latency
}

// checkAnswer validates the answer against the kind's contract, with one repair reprompt
// carrying the validation error (the provider layer makes its own against the output schema;
// this one also covers what only the contract checks), and caches the valid answer.
func (a *Agent) checkAnswer(ctx context.Context, t *task, req *llm.Request, c *conversation) (json.RawMessage, *Result, error) {
	role := t.role
	payload, verr := a.validate(c.final.Text, role, t.in)
	if verr != nil && !c.fromHit && !t.repaired {
		rep := req.Clone()
		rep.Tools = nil
		rep.Messages = append(rep.Messages, llm.Message{Role: llm.RoleAssistant, Content: c.final.Text},
			llm.Message{Role: llm.RoleUser, Content: llm.RepairPrompt(role.Kind, verr)})
		resp, err := a.cfg.LLM.Complete(ctx, rep)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			if llm.KindOf(err) == llm.KindBudget {
				// The repair is a paid call of its own, which a budget may refuse.
				done, err := a.budgetFallback(ctx, t, err)
				return nil, done, err
			}
			done, err := a.fallback(ctx, t, CauseLLMError, "the repair reprompt failed: "+err.Error())
			return nil, done, err
		}
		t.account(resp)
		t.repaired = true
		c.final = &turn{Text: resp.Text, Provider: resp.Provider, Model: resp.Model}
		payload, verr = a.validate(c.final.Text, role, t.in)
	}
	if verr != nil {
		done, err := a.fallback(ctx, t, CauseInvalidOutput, "the answer does not match the "+role.Kind+" schema: "+verr.Error())
		return nil, done, err
	}
	if !c.fromHit {
		if err := a.putTurn(ctx, c.turnKey, c.final); err != nil {
			return nil, nil, err
		}
	}
	return payload, nil, nil
}

// provenanceOf is what the proposal records of how it was made (and counts the cache hit or
// miss and the tool calls).
func (a *Agent) provenanceOf(t *task, c *conversation) (*events.Provenance, error) {
	purpose, spec := string(t.role.Purpose), t.spec
	cacheHit := c.fromHit && !c.liveTurn
	if cacheHit {
		a.m.cacheHits.WithLabelValues(purpose).Inc()
	} else {
		a.m.cacheMiss.WithLabelValues(purpose).Inc()
	}
	a.m.toolCalls.WithLabelValues(purpose).Observe(float64(t.executed))
	ch, err := provenance.ContextHash(purpose, spec.SHA256, provenance.ToolResults(t.calls), c.final.Model)
	if err != nil {
		return nil, err
	}
	ref := spec.Ref()
	return &events.Provenance{
		Provider: c.final.Provider, Model: c.final.Model,
		PromptTemplate: &events.TemplateRef{ID: ref.ID, Version: ref.Version, SHA256: ref.SHA256},
		ContextHash:    ch, ToolCalls: t.calls,
		Tokens:      events.Tokens{Prompt: t.usage.PromptTokens, Completion: t.usage.CompletionTokens, Cached: t.usage.CachedPromptTokens},
		CostUSD:     t.cost,
		Temperature: spec.Temperature, Seed: spec.Seed,
		LatencyMs: float64(t.latency.Microseconds()) / 1000,
		CacheHit:  cacheHit,
	}, nil
}

// proposeAnswer builds the proposal, counts it and logs the prompt as issued.
func (a *Agent) proposeAnswer(ctx context.Context, t *task, payload json.RawMessage, prov *events.Provenance) (*Result, error) {
	res, err := a.propose(ctx, t, payload, prov)
	if err != nil {
		return nil, err
	}
	res.Downgrade = t.downgrade
	outcome := telemetry.OutcomeAccepted
	if t.repaired {
		outcome = telemetry.OutcomeModified
	}
	a.m.tasks.WithLabelValues(t.role.Name, "proposed").Inc()
	a.logger(ctx).Info(telemetry.PromptIssued, a.dims(t, res.Proposal, outcome)...)
	return res, nil
}

// turn is one model answer as cached.
type turn struct {
	Text      string         `json:"text,omitempty"`
	ToolCalls []llm.ToolCall `json:"toolCalls,omitempty"`
	Provider  string         `json:"provider"`
	Model     string         `json:"model"`
}

func (a *Agent) cachedTurn(ctx context.Context, key string) (*turn, bool, error) {
	raw, err := a.cfg.Cache.Get(ctx, key)
	if errors.Is(err, ErrMiss) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("AI cache lookup: %w", err)
	}
	var tr turn
	if err := json.Unmarshal(raw, &tr); err != nil {
		return nil, false, nil // an unreadable entry is a miss; the fresh answer overwrites it
	}
	return &tr, true, nil
}

func (a *Agent) putTurn(ctx context.Context, key string, tr *turn) error {
	raw, err := json.Marshal(tr)
	if err != nil {
		return err
	}
	if err := a.cfg.Cache.Put(ctx, key, raw); err != nil {
		return fmt.Errorf("AI cache store: %w", err)
	}
	return nil
}

// plannedModel is the target the request goes to first: part of the cache key, so answers of
// different models are never mixed up.
func (a *Agent) plannedModel(req *llm.Request) string {
	if r, ok := a.cfg.LLM.(interface {
		Targets(*llm.Request) ([]llm.Target, error)
	}); ok {
		if ts, err := r.Targets(req); err == nil && len(ts) > 0 {
			return ts[0].String()
		}
	}
	return a.cfg.LLM.Name() + ":" + string(req.Purpose)
}

func missingTools(required []string, offered []client.Tool) []string {
	var missing []string
	for _, r := range required {
		if !slices.ContainsFunc(offered, func(t client.Tool) bool { return t.Name == r }) {
			missing = append(missing, r)
		}
	}
	return missing
}

// budgetMessage is what the model is told for a call over the budget.
func budgetMessage(budget int) string {
	return fmt.Sprintf("not run: the budget of %d tool calls per task is spent; answer with what you have", budget)
}

// runTools executes the model's tool calls within the budget and appends the results to the
// conversation. It returns a reason when a server is down (the task must fall back).
func (a *Agent) runTools(ctx context.Context, t *task, calls []llm.ToolCall, servers map[string]string, req *llm.Request) (string, error) {
	budget := a.cfg.ToolBudget
	var down string
	for _, c := range calls {
		rec := events.ToolCall{Server: servers[c.Name], Tool: c.Name}
		args := c.Args
		if len(args) == 0 || !json.Valid(args) {
			args = json.RawMessage(`{}`)
		}
		ah, err := provenance.ArgsHash(args)
		if err != nil {
			return "", err
		}
		rec.ArgsHash = ah
		var content string
		isErr := false
		switch {
		case t.executed >= budget:
			if !t.budget {
				t.budget = true
				a.m.budgetHits.WithLabelValues(string(t.role.Purpose)).Inc()
				a.logger(ctx).Warn(telemetry.ToolBudgetExceeded, "correlationId", t.env.CorrelationID, telemetry.DimRole, t.role.Name,
					telemetry.DimPurpose, string(t.role.Purpose), "budget", budget, "requestedThisTurn", len(calls),
					"reason", fmt.Sprintf("the model asked for more than %d tool calls; calls beyond the budget were not run", budget))
			}
			rec.Error = budgetMessage(budget)
			content, isErr = rec.Error, true
		case rec.Server == "" || !t.role.Allows(c.Name):
			rec.Server = "none"
			rec.Error = fmt.Sprintf("tool %q is not available to this task", c.Name)
			content, isErr = rec.Error, true
		default:
			t.executed++
			res, reused := a.cfg.Reuse.get(t, c.Name, ah)
			var err error
			if reused {
				a.m.reused.WithLabelValues(string(t.role.Purpose)).Inc()
			} else {
				var argv any
				_ = json.Unmarshal(args, &argv)
				if res, err = a.cfg.Tools.Call(ctx, c.Name, argv); err == nil {
					a.cfg.Reuse.put(t, c.Name, ah, res)
				}
			}
			if err != nil {
				if ctx.Err() != nil {
					return "", ctx.Err()
				}
				a.logger(ctx).Warn(telemetry.ToolFailed, "correlationId", t.env.CorrelationID, telemetry.DimRole, t.role.Name,
					telemetry.DimPurpose, string(t.role.Purpose),
					"server", rec.Server, "tool", c.Name, "kind", string(client.KindOf(err)), "error", err.Error())
				switch client.KindOf(err) {
				case client.KindUnavailable, client.KindTimeout, client.KindClosed:
					if down == "" {
						down = fmt.Sprintf("MCP server %s is unavailable (%s failed: %v)", rec.Server, c.Name, err)
					}
				}
				rec.Error = toolErrorText(err)
				content, isErr = rec.Error, true
			} else {
				result := res.Structured
				if len(result) == 0 || !json.Valid(result) {
					result, _ = json.Marshal(res.Text) // text-only tools: the text as a JSON string
				}
				rh, err := provenance.ResultHash(result)
				if err != nil {
					return "", err
				}
				rec.Result, rec.ResultHash = result, rh
				content = string(result)
			}
		}
		if rec.ResultHash == "" {
			eh, _ := provenance.ResultHash(mustString(rec.Error))
			rec.ResultHash = eh
		}
		if len(t.calls) < maxRecordedCalls {
			t.calls = append(t.calls, rec)
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: content, IsError: isErr})
	}
	return down, nil
}

func mustString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func toolErrorText(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Kind == client.KindToolError && ce.Message != "" {
		return ce.Message
	}
	return err.Error()
}

// validate extracts the JSON answer, binds the trigger's ids over it and checks it against the
// kind's schema.
func (a *Agent) validate(text string, role roles.Role, in roles.Input) (json.RawMessage, error) {
	payload, err := roles.Bind([]byte(llm.ExtractJSON(text)), in.Bind)
	if err != nil {
		return nil, err
	}
	if err := events.ValidatePayload(role.Kind, payload); err != nil {
		return nil, err
	}
	return payload, nil
}

// propose builds the proposal (an LLM role's checked as the schema gate will check it).
func (a *Agent) propose(ctx context.Context, t *task, payload json.RawMessage, prov *events.Provenance) (*Result, error) {
	pending, err := a.cfg.Routes.For(t.role.Kind)
	if err != nil {
		return nil, err
	}
	info, _ := events.LookupKind(t.role.Kind)
	origin := t.env.OccurredUTC
	p := &events.Proposal{
		ProposalID:    ProposalID(t.role.Name, t.env.EventID, t.attempt),
		Kind:          t.role.Kind,
		SchemaVersion: events.ProposalSchemaVersion,
		CorrelationID: t.env.CorrelationID,
		CausationID:   t.env.EventID,
		AgentRole:     t.role.Name,
		Actor:         actorOf(t.env),
		Payload:       payload,
		Provenance:    withRail(prov, t.in.Rail),
		Route:         events.Route{Pending: pending},
		Attempt:       t.attempt,
		// The route decides approval for destructive kinds; agents never emit those.
		RequiresApproval: info.Destructive,
		CreatedUTC:       a.cfg.Now().UTC(),
		OriginUTC:        &origin,
	}
	// An LLM role's proposal (model output or fallback content) is checked as the schema
	// gate will check it before it leaves. A rules role's payload was validated as it was
	// built (resolveMove) and the rest is the code's own: the schema gate checks that once.
	if t.role.UsesLLM {
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		if _, err := events.DecodeProposal(raw); err != nil {
			return nil, fmt.Errorf("built an invalid %s proposal: %w", t.role.Kind, err)
		}
		// What was sent, for telling a refusal of it at the first gate from a forged one.
		if err := a.recordSent(ctx, p); err != nil {
			return nil, err
		}
	}
	// A new proposal enters on the role's emitter subject, which only the ai-worker's NATS user
	// may publish to; the schema gate admits there only the role's kinds.
	return &Result{Proposal: p, Subject: events.EmitSubject(t.role.Name), MsgID: p.ProposalID + ":gate:" + pending[0]}, nil
}

// actorOf is the proposal's actor: the player the event names when it names one (budgets and
// limits key on that player, whatever actor id the envelope claims), else the event's actor.
func actorOf(env *events.Envelope) events.Actor {
	if p := events.PlayerOf(env); p != "" {
		return events.Actor{Kind: "player", ID: p}
	}
	return env.Actor
}

// fallback proposes static content, recording why.
func (a *Agent) fallback(ctx context.Context, t *task, cause, reason string) (*Result, error) {
	tbl := a.cfg.Fallback
	payload, err := tbl.Payload(t.role.Kind, t.in.Bind)
	if err != nil {
		return nil, err
	}
	ref := tbl.Ref()
	ch, err := provenance.ContextHash(string(t.role.Purpose), ref.SHA256, provenance.ToolResults(t.calls), fallback.Model)
	if err != nil {
		return nil, err
	}
	if len(reason) > 480 {
		reason = reason[:480] + "…"
	}
	prov := &events.Provenance{
		Provider: fallback.Provider, Model: fallback.Model, PromptTemplate: &ref, ContextHash: ch, ToolCalls: t.calls,
		Tokens:  events.Tokens{Prompt: t.usage.PromptTokens, Completion: t.usage.CompletionTokens, Cached: t.usage.CachedPromptTokens},
		CostUSD: t.cost, LatencyMs: float64(t.latency.Microseconds()) / 1000, Fallback: reason,
	}
	res, err := a.propose(ctx, t, payload, prov)
	if err != nil {
		return nil, err
	}
	res.Downgrade = t.downgrade
	a.m.fallbacks.WithLabelValues(string(t.role.Purpose), cause).Inc()
	a.m.toolCalls.WithLabelValues(string(t.role.Purpose)).Observe(float64(t.executed))
	a.m.tasks.WithLabelValues(t.role.Name, "fallback").Inc()
	a.logger(ctx).Warn(telemetry.PromptFallback, append(a.dims(t, res.Proposal, telemetry.OutcomeModified), telemetry.DimFallbackReason, reason, "cause", cause)...)
	return res, nil
}

func (a *Agent) dims(t *task, p *events.Proposal, outcome string) []any {
	pv := p.Provenance
	version := ""
	if pv.PromptTemplate != nil {
		version = pv.PromptTemplate.ID + "@" + pv.PromptTemplate.Version
	}
	return []any{
		"correlationId", p.CorrelationID, "proposalId", p.ProposalID, "kind", p.Kind,
		telemetry.DimRole, t.role.Name, telemetry.DimPurpose, string(t.role.Purpose), telemetry.DimProvider, pv.Provider, telemetry.DimModel, pv.Model,
		telemetry.DimTokensPrompt, pv.Tokens.Prompt, telemetry.DimTokensCompletion, pv.Tokens.Completion, telemetry.DimCostUSD, pv.CostUSD,
		telemetry.DimLatencyMs, pv.LatencyMs, telemetry.DimToolCalls, t.executed, telemetry.DimValidation, outcome, telemetry.DimCacheHit, pv.CacheHit,
		// Moderation is the safety gate's: content is not flagged when issued; a flag arrives
		// as Prompt.Genesis.Rejected with ai.moderation.flagged true.
		telemetry.DimModerationFlagged, false,
		telemetry.DimRetryCount, p.Attempt, telemetry.DimTemplateVersion, version, "contextHash", pv.ContextHash,
	}
}
