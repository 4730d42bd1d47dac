// Package anthropic adapts Anthropic's Messages API to llm.Provider, on the
// official github.com/anthropics/anthropic-sdk-go SDK.
//
// Tool calls map to tool_use / tool_result blocks. Structured output uses a
// forced tool whose input schema is the output schema when the request
// offers no other tools; otherwise the schema goes into the system prompt
// and the llm.Registry validates the answer (with one repair reprompt).
// The SDK's retries are disabled: the Registry owns the retry policy.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/worldgate/worldgate/shared/httpx"
	"github.com/worldgate/worldgate/shared/llm"
)

// DefaultMaxTokens is sent when a request sets none (the API requires it).
const DefaultMaxTokens = 1024

// Config configures the Anthropic provider.
type Config struct {
	// Name is the provider name (default "anthropic").
	Name string
	// BaseURL (default https://api.anthropic.com/).
	BaseURL string
	// APIKey is sent as x-api-key. The ANTHROPIC_* environment variables are
	// not read: configuration comes from Worldgate's own config.
	APIKey     string
	HTTPClient *http.Client
	Headers    map[string]string
	// Capabilities overrides the defaults (tools, schema output via forced
	// tool, streaming).
	Capabilities *llm.Capabilities
}

// Provider is the Anthropic Messages provider.
type Provider struct {
	name   string
	client sdk.Client
	caps   llm.Capabilities
}

// New builds a provider. It makes no network calls.
func New(cfg Config) (*Provider, error) {
	if cfg.Name == "" {
		cfg.Name = "anthropic"
	}
	if strings.Contains(cfg.Name, ":") {
		return nil, fmt.Errorf("anthropic: provider name %q must not contain a colon", cfg.Name)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = httpx.Client()
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // the Registry retries, once, by its policy
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	caps := llm.Capabilities{Tools: true, JSONSchema: true, Streaming: true, MaxContext: 200000}
	if cfg.Capabilities != nil {
		caps = *cfg.Capabilities
	}
	return &Provider{name: cfg.Name, client: sdk.NewClient(opts...), caps: caps}, nil
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return p.name }

// Capabilities implements llm.Provider.
func (p *Provider) Capabilities() llm.Capabilities { return p.caps }

// Complete implements llm.Provider.
func (p *Provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, outTool, err := p.params(req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	msg, err := p.client.Messages.New(ctx, params)
	if err != nil {
		return nil, p.normalize(err)
	}
	resp := p.response(msg, req, outTool)
	resp.Latency = time.Since(start)
	return resp, nil
}

// Stream implements llm.Provider. Usage comes from message_start (input and
// cache) and message_delta (output) events.
func (p *Provider) Stream(ctx context.Context, req *llm.Request, onDelta func(llm.Delta) error) (*llm.Response, error) {
	params, outTool, err := p.params(req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	stream := p.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var (
		acc     sdk.Message
		toolIdx = map[int64]int{} // content block index -> tool call index
	)
	for stream.Next() {
		ev := stream.Current()
		if err := acc.Accumulate(ev); err != nil {
			return nil, &llm.Error{Kind: llm.KindProvider, Provider: p.name, Message: "malformed event stream: " + err.Error(), Err: err}
		}
		if onDelta == nil {
			continue
		}
		var d llm.Delta
		switch ev.Type {
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" && ev.ContentBlock.Name != outTool {
				toolIdx[ev.Index] = len(toolIdx)
				d = llm.Delta{ToolCallIndex: toolIdx[ev.Index], ToolCallID: ev.ContentBlock.ID, ToolName: ev.ContentBlock.Name}
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				d.Text = ev.Delta.Text
			case "input_json_delta":
				if i, ok := toolIdx[ev.Index]; ok {
					d = llm.Delta{ToolCallIndex: i, ToolArgs: ev.Delta.PartialJSON}
				} else {
					d.Text = ev.Delta.PartialJSON // the forced output tool's input is the answer
				}
			}
		}
		if d != (llm.Delta{}) {
			if err := onDelta(d); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, p.normalize(err)
	}
	resp := p.response(&acc, req, outTool)
	resp.Latency = time.Since(start)
	return resp, nil
}

func (p *Provider) response(msg *sdk.Message, req *llm.Request, outTool string) *llm.Response {
	resp := &llm.Response{Provider: p.name, Model: string(msg.Model)}
	if resp.Model == "" {
		resp.Model = req.Model
	}
	var text strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			input := json.RawMessage(b.Input)
			if len(input) == 0 || !json.Valid(input) {
				input = json.RawMessage(`{}`)
			}
			if outTool != "" && b.Name == outTool {
				text.Reset()
				text.Write(input)
				continue
			}
			resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Args: input})
		}
	}
	resp.Text = text.String()
	u := msg.Usage
	// input_tokens excludes cache reads and writes; our PromptTokens is the
	// whole prompt, of which CachedPromptTokens were read from the cache.
	resp.Usage = llm.Usage{
		PromptTokens:       int(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens),
		CompletionTokens:   int(u.OutputTokens),
		CachedPromptTokens: int(u.CacheReadInputTokens),
		CacheWriteTokens:   int(u.CacheCreationInputTokens),
	}
	switch {
	case len(resp.ToolCalls) > 0:
		resp.FinishReason = llm.FinishToolCalls
	case msg.StopReason == sdk.StopReasonMaxTokens:
		resp.FinishReason = llm.FinishLength
	case msg.StopReason == sdk.StopReasonRefusal:
		resp.FinishReason = llm.FinishContentFilter
	default:
		resp.FinishReason = llm.FinishStop
	}
	return resp
}

// params builds the Messages API request. outTool names the forced output
// tool, when structured output is done that way.
func (p *Provider) params(req *llm.Request) (params sdk.MessageNewParams, outTool string, err error) {
	bad := func(format string, a ...any) error {
		return &llm.Error{Kind: llm.KindInvalid, Provider: p.name, Message: fmt.Sprintf(format, a...)}
	}
	if req == nil || req.Model == "" {
		return params, "", bad("request names no model")
	}
	params.Model = sdk.Model(req.Model)
	params.MaxTokens = int64(req.MaxTokens)
	if params.MaxTokens <= 0 {
		params.MaxTokens = DefaultMaxTokens
	}
	if req.Temperature != nil {
		params.Temperature = sdk.Float(*req.Temperature)
	}
	// The Messages API has no seed; determinism comes from the cache and
	// the recorded inputs, not from the provider.
	system := req.System

	for i, m := range req.Messages {
		switch m.Role {
		case llm.RoleUser:
			params.Messages = appendBlocks(params.Messages, sdk.MessageParamRoleUser, sdk.NewTextBlock(m.Content))
		case llm.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			for _, c := range m.ToolCalls {
				args := c.Args
				if len(args) == 0 || !json.Valid(args) {
					args = json.RawMessage(`{}`)
				}
				blocks = append(blocks, sdk.NewToolUseBlock(c.ID, args, c.Name))
			}
			if len(blocks) == 0 {
				continue
			}
			params.Messages = appendBlocks(params.Messages, sdk.MessageParamRoleAssistant, blocks...)
		case llm.RoleTool:
			// Tool results travel in the next user turn; consecutive results
			// share one user message, as the API requires.
			params.Messages = appendBlocks(params.Messages, sdk.MessageParamRoleUser, sdk.NewToolResultBlock(m.ToolCallID, m.Content, m.IsError))
		default:
			return params, "", bad("message %d has unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		tp, err := toolParam(t.Name, t.Description, t.InputSchema)
		if err != nil {
			return params, "", bad("tool %s: %v", t.Name, err)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	if req.Output != nil && p.caps.JSONSchema {
		if len(req.Tools) == 0 && isObjectSchema(req.Output.Schema) {
			outTool = toolName(req.Output.Name)
			desc := "Give your final answer by calling this tool; its input is the answer."
			if req.Output.Description != "" {
				desc = req.Output.Description + " " + desc
			}
			tp, err := toolParam(outTool, desc, req.Output.Schema)
			if err != nil {
				return params, "", bad("output schema %s: %v", req.Output.Name, err)
			}
			params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: tp})
			params.ToolChoice = sdk.ToolChoiceUnionParam{OfTool: &sdk.ToolChoiceToolParam{Name: outTool}}
		} else {
			system = strings.TrimSpace(system + "\n\n" + llm.SchemaInstruction(req.Output))
		}
	}
	if system != "" {
		params.System = []sdk.TextBlockParam{{Text: system}}
	}
	return params, outTool, nil
}

// appendBlocks adds blocks to the conversation, merging into the last
// message when it has the same role (the API wants alternating roles).
func appendBlocks(msgs []sdk.MessageParam, role sdk.MessageParamRole, blocks ...sdk.ContentBlockParamUnion) []sdk.MessageParam {
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
		return msgs
	}
	return append(msgs, sdk.MessageParam{Role: role, Content: blocks})
}

func toolParam(name, desc string, schema json.RawMessage) (*sdk.ToolParam, error) {
	var m map[string]any
	if len(schema) > 0 {
		if err := json.Unmarshal(schema, &m); err != nil {
			return nil, fmt.Errorf("input schema is not a JSON object: %w", err)
		}
	}
	in := sdk.ToolInputSchemaParam{Properties: m["properties"], ExtraFields: map[string]any{}}
	if in.Properties == nil {
		in.Properties = map[string]any{}
	}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				in.Required = append(in.Required, s)
			}
		}
	}
	for k, v := range m {
		switch k {
		case "type", "properties", "required", "$schema":
		default:
			in.ExtraFields[k] = v
		}
	}
	tp := &sdk.ToolParam{Name: name, InputSchema: in}
	if desc != "" {
		tp.Description = sdk.String(desc)
	}
	return tp, nil
}

func isObjectSchema(raw json.RawMessage) bool {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	t, _ := m["type"].(string)
	return t == "object" || (t == "" && m["properties"] != nil)
}

// toolName fits a name to ^[a-zA-Z0-9_-]{1,64}$.
func toolName(n string) string {
	var b strings.Builder
	for _, r := range n {
		if r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		s = "output"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// normalize maps SDK and transport errors to *llm.Error.
func (p *Provider) normalize(err error) error {
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		return llm.TransportError(p.name, err)
	}
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(apiErr.RawJSON()), &body)
	msg := body.Error.Message
	if msg == "" {
		msg = http.StatusText(apiErr.StatusCode)
	}
	e := &llm.Error{Kind: llm.KindForStatus(apiErr.StatusCode), Provider: p.name, Status: apiErr.StatusCode, Message: msg, Err: err}
	switch body.Error.Type {
	case "not_found_error":
		e.Kind = llm.KindInvalid
		if llm.ModelNotFoundMessage(msg) {
			e.Kind = llm.KindModelNotFound
		}
	case "billing_error":
		e.Kind = llm.KindQuota
	case "invalid_request_error", "request_too_large":
		e.Kind = llm.KindInvalid
		switch {
		case llm.QuotaMessage(msg): // "Your credit balance is too low to access the Anthropic API."
			e.Kind = llm.KindQuota
		case llm.ContentPolicyMessage(msg): // "Output blocked by content filtering policy"
			e.Kind = llm.KindContentPolicy
		}
	case "authentication_error", "permission_error":
		e.Kind = llm.KindAuth
	case "rate_limit_error":
		e.Kind = llm.KindRateLimit
	case "overloaded_error":
		e.Kind = llm.KindUnavailable
	case "api_error":
		e.Kind = llm.KindProvider
	case "timeout_error":
		e.Kind = llm.KindTimeout
	}
	if apiErr.StatusCode == http.StatusPaymentRequired {
		e.Kind = llm.KindQuota
	}
	if e.Kind == llm.KindInvalid && llm.ContextLengthMessage(msg) {
		e.Kind = llm.KindContextLength
	}
	if apiErr.Response != nil {
		e.RetryAfter = llm.ParseRetryAfter(apiErr.Response.Header, time.Now())
	}
	return e
}
