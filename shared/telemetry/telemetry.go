// Package telemetry names Worldgate's structured log events once: the canonical event names of
// the source design (Prompt.Genesis.Issued, Prompt.Genesis.Rejected, …) and the ai.* dimension
// keys its telemetry specification lists. Every emitter logs one of these names as the record's
// message (slog's "msg") and attaches the dimensions as attributes, so log queries and
// dashboards match on a fixed vocabulary, as the design's Kusto example does:
//
//	name startswith "Prompt.Genesis" … customDimensions['ai.model'] …
//
// A name is added here before it is emitted, and never renamed. Catalog lists every event with
// the keys each record of it must carry, and Check verifies a logged record against it (the
// pipeline tests run it over real logs). The package only names things: it neither logs nor
// imports anything beyond the standard library.
package telemetry

import (
	"fmt"
	"regexp"
	"slices"
)

// AI invocation events, logged by the ai-worker. Issued, Rejected and Fallback are the design's
// "AI invocation events": they carry every required ai.* dimension (RequiredAI).
const (
	// PromptIssued: a proposal with AI content was published.
	PromptIssued = "Prompt.Genesis.Issued"
	// PromptRejected: a gate refused one of the agent's proposals.
	PromptRejected = "Prompt.Genesis.Rejected"
	// PromptReprompted: a refused proposal is regenerated with the gate's reason.
	PromptReprompted = "Prompt.Genesis.Reprompted"
	// PromptRetried: a transiently refused proposal is sent again after its retryAfter.
	PromptRetried = "Prompt.Genesis.Retried"
	// PromptFallback: static fallback content was proposed instead of AI content.
	PromptFallback = "Prompt.Genesis.Fallback"
	// PromptAbandoned: nothing more will be proposed for the trigger.
	PromptAbandoned = "Prompt.Genesis.Abandoned"
	// PromptSkipped: the trigger needs no content (e.g. the location has fresh ambience).
	PromptSkipped = "Prompt.Genesis.Skipped"
	// PromptReused: the answer near-duplicated accepted content, which answers the trigger
	// instead of a regeneration.
	PromptReused = "Prompt.Genesis.Reused"
	// ToolBudgetExceeded: the model asked for more tool calls than the task's budget.
	ToolBudgetExceeded = "Prompt.Tool.BudgetExceeded"
	// ToolFailed: an MCP tool call failed (the model is told; the task goes on or falls back).
	ToolFailed = "Prompt.Tool.Failed"
	// BudgetDowngraded: a spending budget refused the tier a task asked for; a cheaper tier
	// served it.
	BudgetDowngraded = "Prompt.Budget.Downgraded"
	// BudgetRefused: the spending budgets refused every tier; the task falls back to static
	// content (logged before Prompt.Genesis.Fallback).
	BudgetRefused = "Prompt.Budget.Refused"
)

// Deterministic mechanics, logged by the ai-worker's world-rules agent (no LLM).
const (
	// MoveProposed: a move request was checked against the exits and proposed.
	MoveProposed = "World.Move.Proposed"
	// MoveRefused: a move request names no exit; nothing is proposed.
	MoveRefused = "World.Move.Refused"
)

// Gate decisions, logged by the gate chain once per decision.
const (
	GatePassed   = "Proposal.Gate.Passed"
	GateHeld     = "Proposal.Gate.Held" // waits for a person's approval
	GateRejected = "Proposal.Gate.Rejected"
)

// Commits, logged by the event-processor.
const (
	// CommitApplied: a validated proposal's domain event was applied to the graph and published.
	CommitApplied = "Proposal.Commit.Applied"
	// CommitRefused: the graph refused the change (a conflict); the proposal is rejected.
	CommitRefused = "Proposal.Commit.Refused"
)

// DeadLettered is logged by the worker runtime when a message is put on deadletter.<stage>.
const DeadLettered = "Pipeline.Message.DeadLettered"

// The ai.* dimension keys of the source design.
const (
	DimModel             = "ai.model"              // exact model identifier
	DimPurpose           = "ai.purpose"            // ambience | npc_dialogue | quest_seed | …
	DimTokensPrompt      = "ai.tokens.prompt"      // prompt tokens of the invocation
	DimTokensCompletion  = "ai.tokens.completion"  // completion tokens of the invocation
	DimLatencyMs         = "ai.latency.total_ms"   // model time, milliseconds
	DimToolCalls         = "ai.toolCalls.count"    // MCP tool calls made
	DimValidation        = "ai.validation.outcome" // accepted | rejected | modified
	DimModerationFlagged = "ai.moderation.flagged" // true when the safety gate flagged the content
	DimCacheHit          = "ai.cache.hit"          // the output came from the context-hash cache
	DimRetryCount        = "ai.retry.count"        // reprompts so far (the proposal's attempt)
	DimTemplateVersion   = "ai.version.template"   // prompt template id@version
)

// Worldgate's own ai.* dimensions, beyond the design's list.
const (
	DimProvider       = "ai.provider"        // provider name of the registry (scripted, openai, …)
	DimRole           = "ai.role"            // agent role (ambience, npc-dialogue, …)
	DimCostUSD        = "ai.cost.usd"        // what the invocation cost
	DimFallbackReason = "ai.fallback.reason" // why static content was used
	DimTierFrom       = "ai.tier.from"       // the tier a budget refused
	DimTierTo         = "ai.tier.to"         // the cheaper tier that served the call
	DimBudgetReason   = "ai.budget.reason"   // which budget refused, and its state
)

// Keys shared by every pipeline event.
const (
	KeyCorrelationID = "correlationId"
	KeyProposalID    = "proposalId"
	KeyGate          = "gate"
	KeyCode          = "code"
)

// Values of ai.validation.outcome.
const (
	OutcomeAccepted = "accepted"
	OutcomeRejected = "rejected"
	OutcomeModified = "modified" // the answer needed a repair reprompt, or fell back
)

// RequiredAI are the dimensions every AI invocation event carries (the design's required list).
// The design's optional ones (ai.cache.hit, ai.retry.count, ai.version.template) are attached
// when known.
var RequiredAI = []string{DimModel, DimPurpose, DimTokensPrompt, DimTokensCompletion, DimLatencyMs,
	DimToolCalls, DimValidation, DimModerationFlagged}

// Event describes one catalogued event.
type Event struct {
	Name     string
	Emitter  string   // the service that logs it
	Meaning  string   // what happened, in a sentence
	Required []string // keys every record of it carries
}

func ai(keys ...string) []string {
	return append(append([]string{KeyCorrelationID, KeyProposalID}, RequiredAI...), keys...)
}

var catalog = []Event{
	{PromptIssued, "ai-worker", "a proposal with AI content was published", ai(DimCacheHit, DimRetryCount, DimTemplateVersion)},
	{PromptRejected, "ai-worker", "a gate refused one of the agent's proposals", ai(KeyGate, KeyCode, DimRetryCount)},
	{PromptReprompted, "ai-worker", "a refused proposal is regenerated with the gate's reason", []string{KeyCorrelationID, KeyProposalID, DimPurpose, DimRetryCount}},
	{PromptRetried, "ai-worker", "a transiently refused proposal is sent again after its retryAfter", []string{KeyCorrelationID, KeyProposalID, DimPurpose}},
	{PromptFallback, "ai-worker", "static fallback content was proposed instead of AI content", ai(DimFallbackReason)},
	{PromptAbandoned, "ai-worker", "nothing more will be proposed for the trigger", []string{KeyCorrelationID, KeyProposalID, DimPurpose}},
	{PromptSkipped, "ai-worker", "the trigger needs no content", []string{KeyCorrelationID, DimPurpose}},
	{ToolBudgetExceeded, "ai-worker", "the model asked for more tool calls than the task's budget", []string{KeyCorrelationID, DimPurpose}},
	{ToolFailed, "ai-worker", "an MCP tool call failed", []string{KeyCorrelationID, DimPurpose}},
	{BudgetDowngraded, "ai-worker", "a budget refused the asked tier; a cheaper tier served the call", []string{KeyCorrelationID, DimPurpose, DimTierFrom, DimTierTo, DimBudgetReason}},
	{BudgetRefused, "ai-worker", "the budgets refused every tier; static fallback content instead", []string{KeyCorrelationID, DimPurpose, DimBudgetReason}},
	{MoveProposed, "ai-worker", "a move request was checked against the exits and proposed", []string{KeyCorrelationID, KeyProposalID, DimRole}},
	{MoveRefused, "ai-worker", "a move request names no exit; nothing is proposed", []string{KeyCorrelationID, DimRole}},
	{GatePassed, "gate", "a gate passed a proposal on to its next hop", []string{KeyCorrelationID, KeyProposalID, KeyGate}},
	{GateHeld, "gate", "a proposal waits for a person's approval", []string{KeyCorrelationID, KeyProposalID, KeyGate}},
	{GateRejected, "gate", "a gate refused a proposal", []string{KeyCorrelationID, KeyProposalID, KeyGate, KeyCode}},
	{CommitApplied, "event-processor", "a validated proposal's domain event was applied and published", []string{KeyCorrelationID, KeyProposalID}},
	{CommitRefused, "event-processor", "the graph refused a validated proposal's change", []string{KeyCorrelationID, KeyProposalID}},
	{DeadLettered, "runtime", "a message was put on deadletter.<stage>", []string{KeyCorrelationID, "stage", "reason"}},
}

// Catalog lists every event Worldgate logs by name.
func Catalog() []Event { return slices.Clone(catalog) }

// Lookup returns the catalogued event called name.
func Lookup(name string) (Event, bool) {
	i := slices.IndexFunc(catalog, func(e Event) bool { return e.Name == name })
	if i < 0 {
		return Event{}, false
	}
	return catalog[i], true
}

// eventName is the shape of an event name: dotted, capitalised segments (Prompt.Genesis.Issued).
var eventName = regexp.MustCompile(`^[A-Z][A-Za-z]*(\.[A-Z][A-Za-z]*)+$`)

// LooksLikeEvent reports whether msg has the shape of an event name rather than a sentence.
func LooksLikeEvent(msg string) bool { return eventName.MatchString(msg) }

// Check verifies one decoded JSON log record: a message shaped like an event name must be a
// catalogued one, and the record must carry the event's required keys. Other records (plain
// sentences) pass.
func Check(record map[string]any) error {
	msg, _ := record["msg"].(string)
	if !LooksLikeEvent(msg) {
		return nil
	}
	ev, ok := Lookup(msg)
	if !ok {
		return fmt.Errorf("%q is logged as an event but is not in the telemetry catalog (shared/telemetry)", msg)
	}
	var missing []string
	for _, k := range ev.Required {
		if _, ok := record[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s lacks %v", msg, missing)
	}
	return nil
}
