// Package replay regenerates an AI proposal from what it recorded: the trigger event, the
// template version (whose SHA-256 must still match), the tool results in its provenance, the
// model and its parameters. It runs the agent's own generation (agent.Generate) with the
// recorded tool results in place of live MCP calls, so a replay sends the model exactly the
// request the proposal was made from; with the scripted provider the payload comes back
// byte-identical, with a real model the report carries a diff.
//
// A shadow run (Rerun) is the same regeneration with another template version or model: tools
// the recording lacks are then called live (the MCP tools are read-only), and the run says so.
//
// Nothing here publishes or commits: the regenerated proposal is returned, never sent. The
// model calls are paid for: given a provider layer with the budget ledger (the worldgate CLI
// gives it one, budget.OpenLedger), each reserves and settles in the ai-workers' budget
// windows (global, purpose and model budgets; no player's) and a paused or spent budget
// refuses it (ProblemBudget).
//
// It is tooling of the worldgate CLI (`worldgate replay`, `worldgate shadow`): it composes the
// ai-worker's agent with the gates' dry run, so it lives under the CLI, the one composition root
// that may import more than one service.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/fallback"
	"github.com/worldgate/worldgate/events/provenance"
	"github.com/worldgate/worldgate/services/ai-worker/agent"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/mcpx/client"
)

// Problem classifies why a proposal cannot be replayed.
type Problem string

// Problems.
const (
	// ProblemUnknown: no proposal with that id is recorded.
	ProblemUnknown Problem = "unknown_proposal"
	// ProblemIncomplete: the provenance, the trigger or a reprompt's rejection is missing.
	ProblemIncomplete Problem = "incomplete_provenance"
	// ProblemTemplateGone: the recorded template version is no longer registered.
	ProblemTemplateGone Problem = "template_version_gone"
	// ProblemTemplateChanged: the registered text of that version has another SHA-256.
	ProblemTemplateChanged Problem = "template_hash_differs"
	// ProblemNotReplayable: nothing was generated (a narrator's or a deterministic role's).
	ProblemNotReplayable Problem = "not_replayable"
	// ProblemBudget: the LLM budgets refused the model call (spent, or paused: the kill
	// switch). A regeneration reserves and settles in the same budget windows as the
	// ai-worker (give the provider layer the budget ledger: budget.OpenLedger).
	ProblemBudget Problem = "budget_refused"
)

// Error is a proposal that cannot be replayed, and why.
type Error struct {
	Problem    Problem  `json:"problem"`
	ProposalID string   `json:"proposalId"`
	Message    string   `json:"message"`
	Missing    []string `json:"missing,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("proposal %s cannot be replayed (%s): %s", e.ProposalID, e.Problem, e.Message)
}

// Recording is what the streams hold of one proposal.
type Recording struct {
	// Proposal as it was emitted, with its provenance.
	Proposal *events.Proposal
	// Trigger is the world event that caused it (nil when it is no longer on the stream).
	Trigger *events.Envelope
	// Rejection is, for a reprompt (attempt n > 0), the refusal of attempt n-1 that it answers;
	// its proposal carries the refused payload.
	Rejection *events.Rejection
}

// Config are a Replayer's dependencies.
type Config struct {
	// LLM is the provider layer (llmsetup builds it). Required.
	LLM llm.Provider
	// Tools are the live MCP servers: they list the tools offered to the model (their names,
	// descriptions and schemas are part of the request), and a shadow run calls the tools its
	// recording lacks. A replay never calls a tool. Required.
	Tools agent.ToolSource
	// Routes per kind (default: the ai-worker's, route.Default()).
	Routes agent.Routes
	// Fallback is the fallback content table (default fallback.Default()).
	Fallback *fallback.Table
	Logger   *slog.Logger
}

// Replayer regenerates proposals.
type Replayer struct{ cfg Config }

// New returns a Replayer.
func New(cfg Config) (*Replayer, error) {
	switch {
	case cfg.LLM == nil:
		return nil, errors.New("replay: an LLM provider is required")
	case cfg.Tools == nil:
		return nil, errors.New("replay: the MCP tool source is required (it lists the tools the model was offered)")
	case cfg.Routes == nil:
		return nil, errors.New("replay: routes are required")
	}
	if cfg.Fallback == nil {
		cfg.Fallback = fallback.Default()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Replayer{cfg: cfg}, nil
}

// Report is the outcome of one replay.
type Report struct {
	ProposalID string `json:"proposalId"`
	Kind       string `json:"kind"`
	AgentRole  string `json:"agentRole"`
	Attempt    int    `json:"attempt"`
	// Template is the recorded template version (id@version) and its SHA-256.
	Template       string `json:"template"`
	TemplateSHA256 string `json:"templateSha256"`
	// Model is the recorded provider:model; Replayed the one that answered the replay.
	Model         string `json:"model"`
	ReplayedModel string `json:"replayedModel"`
	// Fallback: the proposal was fallback content, regenerated from the fallback table.
	Fallback bool `json:"fallback,omitempty"`
	// Identical: the regenerated payload is byte-identical to the recorded one.
	Identical bool `json:"identical"`
	// ContextHashMatches: the replay recomputed the recorded context hash.
	ContextHashMatches bool `json:"contextHashMatches"`
	// Recorded and Replayed are the payloads' exact bytes.
	Recorded string `json:"recorded"`
	Replayed string `json:"replayed"`
	// Diff is the difference of the payloads' fields (recorded -, replayed +) when not identical.
	Diff string `json:"diff,omitempty"`
	// Tools is what each tool call of the replay was answered with.
	Tools []ToolUse `json:"tools,omitempty"`
	// Note says why the replay went another way (a fallback, a tool the recording lacks).
	Note string `json:"note,omitempty"`
}

// ToolUse is one tool call of a regeneration.
type ToolUse struct {
	Tool string `json:"tool"`
	// Source: "recorded" (the recorded result), "live" (called now: the recording lacks it),
	// or "missing" (a replay, which never calls live: the model was told it failed).
	Source string `json:"source"`
}

// Tool sources.
const (
	SourceRecorded = "recorded"
	SourceLive     = "live"
	SourceMissing  = "missing"
)

// Replay regenerates rec's proposal with its recorded template version, model and tool results.
// An *Error says why it cannot.
func (r *Replayer) Replay(ctx context.Context, rec Recording) (*Report, error) {
	p := rec.Proposal
	if p == nil {
		return nil, &Error{Problem: ProblemUnknown, Message: "no proposal given"}
	}
	role, err := aiRole(p)
	if err != nil {
		return nil, err
	}
	pv := p.Provenance
	spec, err := recordedTemplate(p)
	if err != nil {
		return nil, err
	}
	rep := &Report{ProposalID: p.ProposalID, Kind: p.Kind, AgentRole: p.AgentRole, Attempt: p.Attempt,
		Template: pv.PromptTemplate.ID + "@" + pv.PromptTemplate.Version, TemplateSHA256: pv.PromptTemplate.SHA256,
		Model: pv.Provider + ":" + pv.Model, Recorded: string(p.Payload)}
	g, err := generation(rec, role)
	if err != nil {
		return nil, err
	}
	if pv.Fallback != "" {
		return r.replayFallback(rep, g)
	}
	if spec == nil {
		return nil, incomplete(p, "provenance.promptTemplate names the fallback table but provenance.fallback is empty")
	}
	g.Template, g.Model = spec, pv.Provider+":"+pv.Model
	res, uses, err := r.run(ctx, p, g, false)
	if err != nil {
		return nil, err
	}
	rep.Tools = uses
	got := res.Proposal
	rep.Replayed = string(got.Payload)
	rep.ReplayedModel = got.Provenance.Provider + ":" + got.Provenance.Model
	rep.ContextHashMatches = got.Provenance.ContextHash == pv.ContextHash
	if got.Provenance.Fallback != "" {
		rep.Note = "the replay ended in fallback content: " + got.Provenance.Fallback
	} else if n := countSource(uses, SourceMissing); n > 0 {
		rep.Note = fmt.Sprintf("the model asked for %d tool call(s) the recording does not hold, so it answered from other context", n)
	}
	compare(rep)
	return rep, nil
}

// replayFallback regenerates fallback content from the fallback table the proposal names.
func (r *Replayer) replayFallback(rep *Report, g agent.Generation) (*Report, error) {
	ref := r.cfg.Fallback.Ref()
	if t := rep.Template; t != ref.ID+"@"+ref.Version || rep.TemplateSHA256 != ref.SHA256 {
		return nil, &Error{Problem: ProblemTemplateChanged, ProposalID: rep.ProposalID,
			Message: fmt.Sprintf("the fallback content came from table %s (sha256 %s); the table now is %s@%s (sha256 %s)",
				t, rep.TemplateSHA256, ref.ID, ref.Version, ref.SHA256)}
	}
	payload, err := r.cfg.Fallback.Payload(g.Role.Kind, g.Input.Bind)
	if err != nil {
		return nil, err
	}
	rep.Fallback, rep.Replayed, rep.ReplayedModel = true, string(payload), fallback.Provider+":"+fallback.Model
	rep.ContextHashMatches = true // fallback content has no model context to recompute
	compare(rep)
	return rep, nil
}

// compare fills Identical and Diff.
func compare(rep *Report) {
	rep.Identical = rep.Recorded == rep.Replayed
	if !rep.Identical {
		rep.Diff = Diff([]byte(rep.Recorded), []byte(rep.Replayed))
	}
}

// Diff is the difference of two payloads field by field (go-cmp's report: - recorded,
// + regenerated); of the raw text when either is not JSON.
func Diff(recorded, replayed json.RawMessage) string {
	var a, b any
	if json.Unmarshal(recorded, &a) != nil || json.Unmarshal(replayed, &b) != nil {
		return cmp.Diff(string(recorded), string(replayed))
	}
	return cmp.Diff(a, b)
}

// aiRole is the LLM role that made p, or an *Error for a proposal no model wrote.
func aiRole(p *events.Proposal) (roles.Role, error) {
	if p.Provenance != nil && p.Provenance.Narrator != nil || p.AgentRole == events.EmitterNarrator {
		return roles.Role{}, &Error{Problem: ProblemNotReplayable, ProposalID: p.ProposalID,
			Message: "an outside narrator wrote it through mcp-propose: no model call to regenerate"}
	}
	role, ok := roles.Lookup(p.AgentRole)
	if !ok {
		return roles.Role{}, &Error{Problem: ProblemNotReplayable, ProposalID: p.ProposalID,
			Message: fmt.Sprintf("agent role %q is not an ai-worker role (a world file or another emitter made it)", p.AgentRole)}
	}
	if !role.UsesLLM {
		return roles.Role{}, &Error{Problem: ProblemNotReplayable, ProposalID: p.ProposalID,
			Message: fmt.Sprintf("role %s resolves its proposals without a model (deterministic)", role.Name)}
	}
	return role, nil
}

func incomplete(p *events.Proposal, missing ...string) *Error {
	return &Error{Problem: ProblemIncomplete, ProposalID: p.ProposalID, Missing: missing,
		Message: strings.Join(missing, "; ")}
}

// recordedTemplate checks the provenance a replay needs and returns the recorded template
// version (nil for fallback content, whose "template" is the fallback table).
func recordedTemplate(p *events.Proposal) (*templates.Spec, error) {
	pv := p.Provenance
	if pv == nil {
		return nil, incomplete(p, "the proposal has no provenance")
	}
	var missing []string
	if pv.Provider == "" || pv.Model == "" {
		missing = append(missing, "provenance.provider and provenance.model are required")
	}
	t := pv.PromptTemplate
	if t == nil || t.ID == "" || t.Version == "" || t.SHA256 == "" {
		missing = append(missing, "provenance.promptTemplate needs id, version and sha256")
	}
	for i, c := range pv.ToolCalls {
		if len(c.Result) == 0 && c.Error == "" {
			missing = append(missing, fmt.Sprintf("tool call %d (%s) has no recorded result", i+1, c.Tool))
			continue
		}
		if len(c.Result) > 0 {
			if h, err := provenance.ResultHash(c.Result); err != nil || h != c.ResultHash {
				missing = append(missing, fmt.Sprintf("tool call %d (%s): the recorded result does not match its resultHash", i+1, c.Tool))
			}
		}
	}
	if len(missing) > 0 {
		return nil, incomplete(p, missing...)
	}
	if pv.Fallback != "" {
		return nil, nil
	}
	spec, ok := templates.Version(t.ID, t.Version)
	if !ok {
		return nil, &Error{Problem: ProblemTemplateGone, ProposalID: p.ProposalID,
			Message: fmt.Sprintf("prompt template %s@%s is not registered any more; a template version must stay registered while its proposals may be replayed", t.ID, t.Version)}
	}
	if spec.SHA256 != t.SHA256 {
		return nil, &Error{Problem: ProblemTemplateChanged, ProposalID: p.ProposalID,
			Message: fmt.Sprintf("prompt template %s@%s now has sha256 %s, not the recorded %s: its text changed without a new version", t.ID, t.Version, spec.SHA256, t.SHA256)}
	}
	return &spec, nil
}

// generation rebuilds the agent's task from the recording: the role's input from the trigger,
// and a reprompt's feedback.
func generation(rec Recording, role roles.Role) (agent.Generation, error) {
	p := rec.Proposal
	if rec.Trigger == nil {
		return agent.Generation{}, incomplete(p, fmt.Sprintf("the trigger event %s is not on stream %s (expired, or older than the search)", p.CausationID, events.StreamWorld))
	}
	in, err := role.Input(rec.Trigger)
	if err != nil {
		return agent.Generation{}, incomplete(p, "the trigger event does not fit the role: "+err.Error())
	}
	if pv := p.Provenance; pv != nil && pv.InputRail != nil && len(pv.InputRail.Redactions) > 0 && pv.Fallback == "" {
		return agent.Generation{}, incomplete(p, "the input rail redacted personal data from the player's words before the model read them, and the redacted text is not recorded")
	}
	g := agent.Generation{Role: role, Trigger: rec.Trigger, Input: in, Attempt: p.Attempt}
	if p.Attempt > 0 && (p.Provenance == nil || p.Provenance.Fallback == "") {
		if rec.Rejection == nil || rec.Rejection.Proposal == nil {
			return agent.Generation{}, incomplete(p, fmt.Sprintf("attempt %d answers the refusal of attempt %d, which is not on stream %s", p.Attempt, p.Attempt-1, events.StreamProposals))
		}
		g.Rejection, g.Previous = rec.Rejection, rec.Rejection.Proposal.Payload
	}
	return g, nil
}

// run regenerates with an agent of its own: no cache, tool calls answered from the recording
// (and, when live, the rest from the MCP servers), the clock at the proposal's creation.
func (r *Replayer) run(ctx context.Context, p *events.Proposal, g agent.Generation, live bool) (*agent.Result, []ToolUse, error) {
	tools := &recordedTools{live: r.cfg.Tools, calls: p.Provenance.ToolCalls, used: make([]bool, len(p.Provenance.ToolCalls)), allowLive: live}
	created := p.CreatedUTC
	ag, err := agent.New(agent.Config{LLM: r.cfg.LLM, Tools: tools, Cache: noCache{}, Routes: r.cfg.Routes,
		Metrics: agent.NewMetrics(prometheus.NewRegistry()), Logger: r.cfg.Logger, Fallback: r.cfg.Fallback,
		Now: func() time.Time { return created }, Rail: agent.RailConfig{Disabled: true}})
	if err != nil {
		return nil, nil, err
	}
	res, err := ag.Generate(ctx, g)
	if err != nil {
		return nil, nil, err
	}
	if res.Proposal == nil {
		return nil, nil, fmt.Errorf("regenerating %s proposed nothing: %s", p.ProposalID, res.Note)
	}
	if pv := res.Proposal.Provenance; pv != nil && pv.Fallback == agent.BudgetFallbackReason {
		return nil, nil, &Error{Problem: ProblemBudget, ProposalID: p.ProposalID,
			Message: "the LLM budgets refused the model call, so nothing was regenerated (" + strings.TrimPrefix(res.Downgrade, "every tier refused: ") +
				"); a regeneration is paid for under the same budgets as the ai-worker: `worldgate budget` shows them, `worldgate budget resume` lifts a pause"}
	}
	return res, tools.uses(), nil
}

func countSource(uses []ToolUse, source string) int {
	n := 0
	for _, u := range uses {
		if u.Source == source {
			n++
		}
	}
	return n
}

// noCache never hits and keeps nothing: a regeneration always asks the model.
type noCache struct{}

func (noCache) Get(context.Context, string) ([]byte, error) { return nil, agent.ErrMiss }
func (noCache) Put(context.Context, string, []byte) error   { return nil }

// recordedTools answers tool calls from a proposal's recorded results: each recorded call
// answers one call of the same tool with the same arguments (by argsHash). A call the
// recording lacks is made live when allowed, else answered as a failed call.
type recordedTools struct {
	live      agent.ToolSource
	calls     []events.ToolCall
	allowLive bool

	mu   sync.Mutex
	used []bool
	log  []ToolUse
}

func (t *recordedTools) Tools(allowList []string) []client.Tool { return t.live.Tools(allowList) }

func (t *recordedTools) Call(ctx context.Context, tool string, args any) (*client.Result, error) {
	h, err := provenance.ArgsHash(args)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	for i, c := range t.calls {
		if t.used[i] || c.Tool != tool || c.ArgsHash != h {
			continue
		}
		t.used[i] = true
		t.log = append(t.log, ToolUse{Tool: tool, Source: SourceRecorded})
		t.mu.Unlock()
		if c.Error != "" && len(c.Result) == 0 {
			return nil, &client.Error{Kind: client.KindToolError, Server: c.Server, Tool: tool, Message: c.Error}
		}
		return &client.Result{Server: c.Server, Tool: tool, Structured: c.Result}, nil
	}
	if !t.allowLive {
		t.log = append(t.log, ToolUse{Tool: tool, Source: SourceMissing})
		t.mu.Unlock()
		return nil, &client.Error{Kind: client.KindToolError, Tool: tool,
			Message: "not recorded: the replay holds no result for this call"}
	}
	t.log = append(t.log, ToolUse{Tool: tool, Source: SourceLive})
	t.mu.Unlock()
	return t.live.Call(ctx, tool, args)
}

func (t *recordedTools) uses() []ToolUse {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]ToolUse(nil), t.log...)
}
