package llm

import (
	"context"
	"encoding/json"
	"time"
)

// Purpose names what a call is for. It selects the model tier (Config.Purposes) and labels
// metrics, so it must come from a small fixed set (never an id). The layer treats it as an
// opaque string: the callers (the ai-worker's agent roles) define their purposes.
type Purpose string

// Role is the author of a message in a conversation.
type Role string

// Message roles. The system prompt is Request.System, not a message.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one turn of the conversation.
//
// An assistant message that asked for tools carries ToolCalls; each answer
// comes back as a RoleTool message whose ToolCallID names the call it answers.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallId,omitempty"`
	// Name is the tool's name on a RoleTool message (optional, informative).
	Name string `json:"name,omitempty"`
	// IsError marks a tool result that reports a failure.
	IsError bool `json:"isError,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Tool describes a tool the model may call. InputSchema is a JSON Schema for
// the tool's arguments (an object schema).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// OutputSchema asks for structured output: the final answer's Text must be a
// JSON document that validates against Schema.
type OutputSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema"`
}

// Request is one model call.
type Request struct {
	Purpose Purpose `json:"purpose"`
	// Tier selects a model tier in a Registry ("cheap", "rich"). Empty means
	// the tier configured for Purpose.
	Tier string `json:"tier,omitempty"`
	// Model is the model id when calling a provider directly. Given to a
	// Registry as "provider:model" it pins that target and bypasses tiers.
	Model string `json:"model,omitempty"`

	System   string        `json:"system,omitempty"`
	Messages []Message     `json:"messages"`
	Tools    []Tool        `json:"tools,omitempty"`
	Output   *OutputSchema `json:"output,omitempty"`

	Temperature *float64 `json:"temperature,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	MaxTokens   int      `json:"maxTokens,omitempty"`
}

// Clone returns a copy whose slices may be appended to without touching r.
func (r *Request) Clone() *Request {
	c := *r
	c.Messages = append([]Message(nil), r.Messages...)
	c.Tools = append([]Tool(nil), r.Tools...)
	return &c
}

// FinishReason says why the model stopped.
type FinishReason string

// Normalized finish reasons.
const (
	FinishStop          FinishReason = "stop"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishLength        FinishReason = "length"
	FinishContentFilter FinishReason = "content_filter"
)

// Usage counts tokens. PromptTokens includes CachedPromptTokens (read from the provider's
// prompt cache) and CacheWriteTokens (written to it, which Anthropic bills at its own rate).
type Usage struct {
	PromptTokens       int `json:"prompt"`
	CompletionTokens   int `json:"completion"`
	CachedPromptTokens int `json:"cached"`
	CacheWriteTokens   int `json:"cacheWrite,omitempty"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:       u.PromptTokens + o.PromptTokens,
		CompletionTokens:   u.CompletionTokens + o.CompletionTokens,
		CachedPromptTokens: u.CachedPromptTokens + o.CachedPromptTokens,
		CacheWriteTokens:   u.CacheWriteTokens + o.CacheWriteTokens,
	}
}

// Total is every token of the usage: the whole prompt plus the completion.
func (u Usage) Total() int { return max(u.PromptTokens, 0) + max(u.CompletionTokens, 0) }

// Response is a model's answer: either ToolCalls (FinishToolCalls) or Text.
type Response struct {
	Text         string       `json:"text,omitempty"`
	ToolCalls    []ToolCall   `json:"toolCalls,omitempty"`
	FinishReason FinishReason `json:"finishReason"`
	Usage        Usage        `json:"usage"`
	// CostUSD is priced from the price table by the Registry. PriceMissing
	// is set (and CostUSD is 0) when the model has no price entry.
	CostUSD      float64       `json:"costUsd"`
	PriceMissing bool          `json:"priceMissing,omitempty"`
	Provider     string        `json:"provider"`
	Model        string        `json:"model"`
	Latency      time.Duration `json:"latency"`
	// Attempts counts the upstream calls the Registry made for this answer
	// (retries, failovers and a schema repair included).
	Attempts int `json:"attempts,omitempty"`
	// Repaired is set when the answer came from the schema repair reprompt.
	Repaired bool `json:"repaired,omitempty"`
	// Tier is the tier that served the call (empty for a pinned target); Downgrades lists
	// the tiers a budget refused on the way, richest first.
	Tier       string      `json:"tier,omitempty"`
	Downgrades []Downgrade `json:"downgrades,omitempty"`
}

// Delta is one streamed fragment: text, or a fragment of a tool call's
// arguments (ToolCallIndex names which call; ID and Name arrive first).
type Delta struct {
	Text          string `json:"text,omitempty"`
	ToolCallIndex int    `json:"toolCallIndex,omitempty"`
	ToolCallID    string `json:"toolCallId,omitempty"`
	ToolName      string `json:"toolName,omitempty"`
	ToolArgs      string `json:"toolArgs,omitempty"`
}

// Capabilities say what a provider can do natively.
type Capabilities struct {
	Tools bool `json:"tools" yaml:"tools"`
	// JSONSchema: the provider constrains output to a JSON schema itself.
	// Without it the Registry adds an instruction and validates.
	JSONSchema bool `json:"jsonSchema" yaml:"json_schema"`
	Streaming  bool `json:"streaming" yaml:"streaming"`
	// MaxContext is the context window in tokens (0: unknown).
	MaxContext int `json:"maxContext" yaml:"max_context"`
}

// Provider is one LLM backend. Implementations must be safe for concurrent
// use, must not retry on their own, and return failures as *Error.
type Provider interface {
	// Name identifies the provider instance ("openai", "ollama", "scripted").
	Name() string
	Capabilities() Capabilities
	Complete(ctx context.Context, req *Request) (*Response, error)
	// Stream calls onDelta for each fragment as it arrives and returns the
	// assembled Response. An error returned by onDelta aborts the stream and
	// is returned unchanged. Providers without streaming may deliver the
	// whole answer as one Delta.
	Stream(ctx context.Context, req *Request, onDelta func(Delta) error) (*Response, error)
}
