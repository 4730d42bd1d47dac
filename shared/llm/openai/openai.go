// Package openai adapts OpenAI-compatible chat completions APIs (OpenAI,
// Groq, DeepSeek, Ollama, vLLM, … chosen by base URL) to llm.Provider, on the
// official github.com/openai/openai-go/v3 SDK.
//
// It translates requests and answers, normalizes errors into *llm.Error, and
// nothing else: the SDK's own retries are disabled (the llm.Registry owns the
// retry policy), and pricing and metrics are the Registry's decorators.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/worldgate/worldgate/shared/httpx"
	"github.com/worldgate/worldgate/shared/llm"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures one OpenAI-compatible endpoint.
type Config struct {
	// Name is the provider name used in tiers and metrics (default "openai";
	// e.g. "ollama", "groq", "deepseek", "vllm").
	Name string
	// BaseURL of the API, including the version path (default OpenAI's;
	// Ollama: http://localhost:11434/v1; Groq: https://api.groq.com/openai/v1;
	// DeepSeek: https://api.deepseek.com/v1).
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	// The OPENAI_API_KEY environment variable is deliberately not used, so a
	// key for one provider never leaks to another base URL.
	APIKey string
	// HTTPClient to use (default: a client with no overall timeout; the
	// Registry sets per-attempt deadlines on the context).
	HTTPClient *http.Client
	// Headers are added to every request.
	Headers map[string]string
	// Capabilities overrides the defaults (tools, native json_schema and
	// streaming all on). Servers without json_schema support should turn
	// JSONSchema off so that the Registry instructs and validates instead.
	Capabilities *llm.Capabilities
	// MaxTokensField is "max_completion_tokens" or "max_tokens". Default:
	// max_completion_tokens for api.openai.com, max_tokens elsewhere (what
	// most compatible servers understand).
	MaxTokensField string
	// StrictSchema sets strict: true on json_schema response formats
	// (OpenAI then requires every property required and no extra ones).
	StrictSchema bool
}

// Provider is an OpenAI-compatible chat completions provider.
type Provider struct {
	name     string
	client   sdk.Client
	caps     llm.Capabilities
	maxField string
	strict   bool
}

// New builds a provider. It makes no network calls.
func New(cfg Config) (*Provider, error) {
	if cfg.Name == "" {
		cfg.Name = "openai"
	}
	if strings.Contains(cfg.Name, ":") {
		return nil, fmt.Errorf("openai: provider name %q must not contain a colon", cfg.Name)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	switch cfg.MaxTokensField {
	case "":
		cfg.MaxTokensField = "max_tokens"
		if strings.Contains(cfg.BaseURL, "api.openai.com") {
			cfg.MaxTokensField = "max_completion_tokens"
		}
	case "max_tokens", "max_completion_tokens":
	default:
		return nil, fmt.Errorf("openai: MaxTokensField must be max_tokens or max_completion_tokens, not %q", cfg.MaxTokensField)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = httpx.Client()
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // the Registry retries, once, by its policy
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	caps := llm.Capabilities{Tools: true, JSONSchema: true, Streaming: true}
	if cfg.Capabilities != nil {
		caps = *cfg.Capabilities
	}
	return &Provider{
		name:     cfg.Name,
		client:   sdk.NewClient(opts...),
		caps:     caps,
		maxField: cfg.MaxTokensField,
		strict:   cfg.StrictSchema,
	}, nil
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return p.name }

// Capabilities implements llm.Provider.
func (p *Provider) Capabilities() llm.Capabilities { return p.caps }

// Complete implements llm.Provider.
func (p *Provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	cc, err := p.client.Chat.Completions.New(ctx, params)
	if err != nil {
		return nil, p.normalize(err)
	}
	if len(cc.Choices) == 0 {
		return nil, &llm.Error{Kind: llm.KindProvider, Provider: p.name, Message: "answer has no choices"}
	}
	ch := cc.Choices[0]
	resp := &llm.Response{
		Text:     ch.Message.Content,
		Provider: p.name,
		Model:    modelOr(cc.Model, req.Model),
		Usage:    usage(cc.Usage),
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: args(tc.Function.Arguments)})
	}
	resp.FinishReason = finish(ch.FinishReason, len(resp.ToolCalls) > 0)
	if resp.Text == "" && ch.Message.Refusal != "" {
		resp.Text = ch.Message.Refusal
		resp.FinishReason = llm.FinishContentFilter
	}
	resp.Latency = time.Since(start)
	return resp, nil
}

// Stream implements llm.Provider, with stream_options.include_usage so that
// streamed calls are priced too.
func (p *Provider) Stream(ctx context.Context, req *llm.Request, onDelta func(llm.Delta) error) (*llm.Response, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
	start := time.Now()
	stream := p.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()

	resp := &llm.Response{Provider: p.name, Model: req.Model}
	var (
		text    strings.Builder
		calls   = map[int64]*callAcc{}
		reason  string
		refusal strings.Builder
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.Model != "" {
			resp.Model = chunk.Model
		}
		if chunk.JSON.Usage.Valid() {
			resp.Usage = usage(chunk.Usage)
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if ch.FinishReason != "" {
				reason = ch.FinishReason
			}
			d := ch.Delta
			refusal.WriteString(d.Refusal)
			if d.Content != "" {
				text.WriteString(d.Content)
				if onDelta != nil {
					if err := onDelta(llm.Delta{Text: d.Content}); err != nil {
						return nil, err
					}
				}
			}
			for _, tc := range d.ToolCalls {
				acc := calls[tc.Index]
				if acc == nil {
					acc = &callAcc{}
					calls[tc.Index] = acc
				}
				if tc.ID != "" {
					acc.id = tc.ID
				}
				if tc.Function.Name != "" {
					acc.name += tc.Function.Name
				}
				acc.args.WriteString(tc.Function.Arguments)
				if onDelta != nil {
					if err := onDelta(llm.Delta{ToolCallIndex: int(tc.Index), ToolCallID: tc.ID, ToolName: tc.Function.Name, ToolArgs: tc.Function.Arguments}); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, p.normalize(err)
	}
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		c := calls[i]
		resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: c.id, Name: c.name, Args: args(c.args.String())})
	}
	resp.Text = text.String()
	resp.FinishReason = finish(reason, len(resp.ToolCalls) > 0)
	if resp.Text == "" && refusal.Len() > 0 {
		resp.Text = refusal.String()
		resp.FinishReason = llm.FinishContentFilter
	}
	resp.Model = modelOr(resp.Model, req.Model)
	resp.Latency = time.Since(start)
	return resp, nil
}

type callAcc struct {
	id, name string
	args     strings.Builder
}

func (p *Provider) params(req *llm.Request) (sdk.ChatCompletionNewParams, error) {
	var params sdk.ChatCompletionNewParams
	if req == nil || req.Model == "" {
		return params, &llm.Error{Kind: llm.KindInvalid, Provider: p.name, Message: "request names no model"}
	}
	params.Model = shared.ChatModel(req.Model)
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		switch m.Role {
		case llm.RoleUser:
			params.Messages = append(params.Messages, sdk.UserMessage(m.Content))
		case llm.RoleAssistant:
			a := sdk.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = param.NewOpt(m.Content)
			}
			for _, c := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: string(args(string(c.Args)))},
					},
				})
			}
			params.Messages = append(params.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case llm.RoleTool:
			params.Messages = append(params.Messages, sdk.ToolMessage(m.Content, m.ToolCallID))
		default:
			return params, &llm.Error{Kind: llm.KindInvalid, Provider: p.name, Message: fmt.Sprintf("message %d has unknown role %q", i, m.Role)}
		}
	}
	for _, t := range req.Tools {
		schema, err := objectSchema(t.InputSchema)
		if err != nil {
			return params, &llm.Error{Kind: llm.KindInvalid, Provider: p.name, Message: fmt.Sprintf("tool %s: %v", t.Name, err)}
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fd.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fd))
	}
	if req.Output != nil && p.caps.JSONSchema {
		var schema map[string]any
		if err := json.Unmarshal(req.Output.Schema, &schema); err != nil {
			return params, &llm.Error{Kind: llm.KindInvalid, Provider: p.name, Message: fmt.Sprintf("output schema %s is not a JSON object: %v", req.Output.Name, err)}
		}
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: schemaName(req.Output.Name), Schema: schema}
		if req.Output.Description != "" {
			js.Description = sdk.String(req.Output.Description)
		}
		if p.strict {
			js.Strict = sdk.Bool(true)
		}
		params.ResponseFormat = sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}
	}
	if req.Temperature != nil {
		params.Temperature = sdk.Float(*req.Temperature)
	}
	if req.Seed != nil {
		params.Seed = sdk.Int(*req.Seed)
	}
	if req.MaxTokens > 0 {
		if p.maxField == "max_completion_tokens" {
			params.MaxCompletionTokens = sdk.Int(int64(req.MaxTokens))
		} else {
			params.MaxTokens = sdk.Int(int64(req.MaxTokens))
		}
	}
	return params, nil
}

// normalize maps SDK and transport errors to *llm.Error.
func (p *Provider) normalize(err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = strings.TrimSpace(apiErr.RawJSON())
		}
		if msg == "" {
			msg = http.StatusText(apiErr.StatusCode)
		}
		e := &llm.Error{Kind: llm.KindForStatus(apiErr.StatusCode), Provider: p.name, Status: apiErr.StatusCode, Message: msg, Err: err}
		switch {
		// insufficient_quota comes with HTTP 429 like a rate limit, but waiting does not
		// end it: the account is out of credit.
		case apiErr.Code == "insufficient_quota" || apiErr.Type == "insufficient_quota" ||
			apiErr.StatusCode == http.StatusPaymentRequired || (e.Kind == llm.KindRateLimit && llm.QuotaMessage(msg)):
			e.Kind = llm.KindQuota
		case apiErr.Code == "model_not_found" || (apiErr.StatusCode == http.StatusNotFound && llm.ModelNotFoundMessage(msg)):
			e.Kind = llm.KindModelNotFound
		// content_policy_violation (OpenAI), content_filter (Azure OpenAI).
		case apiErr.Code == "content_policy_violation" || apiErr.Code == "content_filter" ||
			(e.Kind == llm.KindInvalid && llm.ContentPolicyMessage(msg)):
			e.Kind = llm.KindContentPolicy
		case apiErr.Code == "context_length_exceeded" || (e.Kind == llm.KindInvalid && llm.ContextLengthMessage(msg)):
			e.Kind = llm.KindContextLength
		case apiErr.Code == "rate_limit_exceeded" || apiErr.Type == "rate_limit_exceeded":
			e.Kind = llm.KindRateLimit
		case apiErr.Code == "invalid_api_key" || apiErr.Type == "authentication_error":
			e.Kind = llm.KindAuth
		}
		if apiErr.Response != nil {
			e.RetryAfter = llm.ParseRetryAfter(apiErr.Response.Header, time.Now())
		}
		return e
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		e := &llm.Error{Kind: llm.KindProvider, Provider: p.name, Message: se.Message, Err: err}
		if llm.ContextLengthMessage(se.Message) {
			e.Kind = llm.KindContextLength
		}
		return e
	}
	return llm.TransportError(p.name, err)
}

func usage(u sdk.CompletionUsage) llm.Usage {
	return llm.Usage{
		PromptTokens:       int(u.PromptTokens),
		CompletionTokens:   int(u.CompletionTokens),
		CachedPromptTokens: int(u.PromptTokensDetails.CachedTokens),
	}
}

func finish(reason string, hasCalls bool) llm.FinishReason {
	if hasCalls {
		return llm.FinishToolCalls
	}
	switch reason {
	case "length":
		return llm.FinishLength
	case "content_filter":
		return llm.FinishContentFilter
	case "tool_calls", "function_call":
		return llm.FinishToolCalls
	}
	return llm.FinishStop
}

// args returns tool call arguments as JSON: "" becomes {} and text that is
// not JSON is kept as a JSON string, so that callers always get valid JSON
// and can report the bad arguments back to the model.
func args(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func objectSchema(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("input schema is not a JSON object: %w", err)
	}
	return m, nil
}

var badName = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// schemaName fits a schema name to what the API accepts: [a-zA-Z0-9_-]{1,64}.
func schemaName(n string) string {
	n = badName.ReplaceAllString(n, "_")
	if n == "" {
		n = "output"
	}
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

func modelOr(got, asked string) string {
	if got != "" {
		return got
	}
	return asked
}
