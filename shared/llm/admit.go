package llm

import (
	"context"
	"encoding/json"
)

// Admitter decides, before a call is made, whether its target may be paid for: a budget
// ledger reserves the call's estimate against every budget it falls under. The Registry asks
// it once per target it is about to call; a refusal (*Error of KindBudget) makes the Registry
// try the next target of the tier, then the tier's cheaper tier (Config.Degrade).
//
// The Registry knows nothing of what is budgeted: who or where the call is for travels in
// the context (the ai-worker's budget package puts it there).
type Admitter interface {
	Admit(ctx context.Context, a Admission) (Ticket, error)
}

// Admission describes a call about to be made on one target.
type Admission struct {
	Purpose Purpose
	// Tier asked for (empty for a pinned target) and the tier being tried.
	Tier   string
	Target Target
	// PromptTokens is the prompt's estimate (EstimatePromptTokens); CompletionTokens the
	// completion cap (the request's MaxTokens, else DefaultCompletionCap).
	PromptTokens     int
	CompletionTokens int
	// EstimateUSD prices that estimate at the target's price (0 when the model has none;
	// PriceMissing is then set).
	EstimateUSD  float64
	PriceMissing bool
	// Degradable: a cheaper tier could serve the call if this one is refused, so a budget
	// may refuse it early (when it runs low) rather than only when it is spent.
	Degradable bool
}

// EstimateTokens is the estimate's total tokens.
func (a Admission) EstimateTokens() int { return a.PromptTokens + a.CompletionTokens }

// Ticket is an admitted call's reservation. Exactly one of Settle or Release is called.
type Ticket interface {
	// Settle replaces the estimate with what the call cost.
	Settle(ctx context.Context, u Usage, costUSD float64) error
	// Release gives the reservation back: the call failed and cost nothing.
	Release(ctx context.Context) error
}

// DefaultCompletionCap is the completion estimate of a request that sets no MaxTokens.
const DefaultCompletionCap = 1024

// EstimatePromptTokens estimates a request's prompt tokens before the call, from its bytes:
// one token per three bytes of system prompt, messages, tool definitions and output schema
// (tokenizers give about four characters of English per token, fewer for JSON; erring high
// keeps a budget from being overrun), plus a few tokens of framing per message.
func EstimatePromptTokens(req *Request) int {
	if req == nil {
		return 0
	}
	n := len(req.System)
	msgs := 0
	for _, m := range req.Messages {
		n += len(m.Content) + len(m.Name) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.ID) + len(c.Args)
		}
		msgs++
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	if req.Output != nil {
		n += len(req.Output.Name) + len(req.Output.Description) + len(compact(req.Output.Schema))
	}
	return (n+2)/3 + 4*msgs + 4
}

func compact(raw json.RawMessage) []byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// Downgrade records that a budget moved a call from one tier to a cheaper one.
type Downgrade struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
}
