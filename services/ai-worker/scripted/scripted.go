// Package scripted is the offline, deterministic LLM provider that Worldgate
// runs by default. It speaks the same tool-calling protocol as a real model:
// offered tools, it first asks for a plausible set of tool calls with
// arguments valid for each tool's schema, drawn from what the prompt mentions;
// given tool results, it writes varied, plausible content for the purpose
// from the names and descriptions it finds there, as JSON conforming to the
// request's output schema when one is given.
//
// Everything it produces is a function of the request alone (a SHA-256 of
// the request seeds its choices), so identical inputs give identical outputs.
// It makes no network calls. Tests steer it through Options (tool calls per
// turn, tool rounds, injected failures), never through special code paths in
// callers.
package scripted

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/worldgate/worldgate/shared/llm"
)

// Model names the scripted provider answers to. Any model id is accepted;
// "large" models write richer content.
const (
	ModelSmall = "scripted-small"
	ModelLarge = "scripted-large"
)

// Options steer the provider. The zero value is the default behaviour.
type Options struct {
	// Name is the provider name (default "scripted").
	Name string
	// ToolCallsPerTurn is how many tool calls a tool turn asks for. 0 means
	// one call per offered tool, at most DefaultToolCalls.
	ToolCallsPerTurn int
	// MaxToolRounds is how many turns ask for tools before the provider
	// answers (default 1). Negative: never call tools.
	MaxToolRounds int
	// Fail, if set, makes the first FailTimes calls fail with a copy of it.
	Fail      *llm.Error
	FailTimes int
	// MaxContext is the context window in estimated tokens (default 32768);
	// longer prompts fail with context_length_exceeded.
	MaxContext int
	// Delay simulates upstream latency per call (default none). It honours
	// the context.
	Delay time.Duration
}

// DefaultToolCalls caps the tool calls of a default tool turn, below the
// ai-worker's budget of 6 per task.
const DefaultToolCalls = 4

// Provider is the scripted provider. It is safe for concurrent use.
type Provider struct {
	opts  Options
	fails atomic.Int64
}

// New returns a scripted provider.
func New(opts Options) *Provider {
	if opts.Name == "" {
		opts.Name = "scripted"
	}
	if opts.MaxToolRounds == 0 {
		opts.MaxToolRounds = 1
	}
	if opts.MaxContext <= 0 {
		opts.MaxContext = 32768
	}
	return &Provider{opts: opts}
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return p.opts.Name }

// Capabilities implements llm.Provider: tools, native JSON-schema output and
// streaming.
func (p *Provider) Capabilities() llm.Capabilities {
	return llm.Capabilities{Tools: true, JSONSchema: true, Streaming: true, MaxContext: p.opts.MaxContext}
}

// Complete implements llm.Provider.
func (p *Provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return p.run(ctx, req)
}

// Stream implements llm.Provider: text arrives in word-sized chunks, each
// tool call as one delta.
func (p *Provider) Stream(ctx context.Context, req *llm.Request, onDelta func(llm.Delta) error) (*llm.Response, error) {
	resp, err := p.run(ctx, req)
	if err != nil {
		return nil, err
	}
	if onDelta == nil {
		return resp, nil
	}
	for i, tc := range resp.ToolCalls {
		if err := onDelta(llm.Delta{ToolCallIndex: i, ToolCallID: tc.ID, ToolName: tc.Name, ToolArgs: string(tc.Args)}); err != nil {
			return nil, err
		}
	}
	for _, chunk := range chunks(resp.Text, 24) {
		if err := ctx.Err(); err != nil {
			return nil, llm.TransportError(p.opts.Name, err)
		}
		if err := onDelta(llm.Delta{Text: chunk}); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

func (p *Provider) run(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	start := time.Now()
	if req == nil {
		return nil, &llm.Error{Kind: llm.KindInvalid, Provider: p.opts.Name, Message: "request is nil"}
	}
	if err := ctx.Err(); err != nil {
		return nil, llm.TransportError(p.opts.Name, err)
	}
	if p.opts.Fail != nil && p.fails.Add(1) <= int64(p.opts.FailTimes) {
		e := *p.opts.Fail
		e.Provider = p.opts.Name
		if e.Message == "" {
			e.Message = "injected failure"
		}
		return nil, &e
	}
	if p.opts.Delay > 0 {
		t := time.NewTimer(p.opts.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, llm.TransportError(p.opts.Name, ctx.Err())
		case <-t.C:
		}
	}
	if err := llm.CheckRequest(req); err != nil {
		if le, ok := err.(*llm.Error); ok {
			le.Provider = p.opts.Name
		}
		return nil, err
	}
	h := hashRequest(req)
	promptTokens := estimatePrompt(req)
	if promptTokens > p.opts.MaxContext {
		return nil, &llm.Error{Kind: llm.KindContextLength, Provider: p.opts.Name, Status: 400,
			Message: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", promptTokens, p.opts.MaxContext)}
	}
	rng := rand.New(rand.NewPCG(binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:16])))
	facts := gather(req)
	model := req.Model
	if model == "" {
		model = ModelSmall
	}
	resp := &llm.Response{Provider: p.opts.Name, Model: model}

	if calls := p.toolTurn(req, facts, rng, h); len(calls) > 0 {
		resp.ToolCalls = calls
		resp.FinishReason = llm.FinishToolCalls
	} else {
		w := writer{rng: rng, f: facts, large: strings.Contains(model, "large")}
		resp.Text = w.answer(req)
		resp.FinishReason = llm.FinishStop
	}
	completion := len(resp.Text)
	for _, c := range resp.ToolCalls {
		completion += len(c.Name) + len(c.Args) + 8
	}
	resp.Usage = llm.Usage{PromptTokens: promptTokens, CompletionTokens: tokens(completion)}
	resp.Latency = time.Since(start)
	return resp, nil
}

// toolTurn decides whether this turn asks for tools and which.
func (p *Provider) toolTurn(req *llm.Request, f *facts, rng *rand.Rand, h [32]byte) []llm.ToolCall {
	if len(req.Tools) == 0 || p.opts.MaxToolRounds < 0 {
		return nil
	}
	rounds := 0
	for _, m := range req.Messages {
		if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
			rounds++
		}
	}
	if rounds >= p.opts.MaxToolRounds {
		return nil
	}
	n := p.opts.ToolCallsPerTurn
	defaulted := n <= 0
	if defaulted {
		n = min(len(req.Tools), DefaultToolCalls)
	}
	// Later rounds start further along the tool list, so a multi-round
	// script explores other tools rather than repeating the first ones.
	offset := rounds * n
	calls := make([]llm.ToolCall, 0, n+1)
	prefix := hex.EncodeToString(h[:6])
	asked := map[string]bool{}
	for i := range n {
		k := offset + i
		t := req.Tools[k%len(req.Tools)]
		variant := k / len(req.Tools)
		args := argsFor(t, f, rng, variant)
		asked[t.Name] = true
		calls = append(calls, llm.ToolCall{
			ID:   fmt.Sprintf("call_%s_%d", prefix, k),
			Name: t.Name,
			Args: args,
		})
	}
	// Like a model holding a conversation, it also looks up what was said
	// before, when a conversation-memory tool is offered (one call beyond the
	// default cap, still within the ai-worker's budget).
	if defaulted && rounds == 0 {
		for k, t := range req.Tools {
			if isMemoryTool(t.Name) && !asked[t.Name] {
				calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("call_%s_m%d", prefix, k), Name: t.Name, Args: argsFor(t, f, rng, 0)})
				break
			}
		}
	}
	return calls
}

// isMemoryTool reports whether a tool recalls earlier conversation
// (get-recent-dialogue).
func isMemoryTool(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "dialogue") || strings.Contains(n, "conversation")
}

// hashRequest is the seed of every choice: identical requests, identical
// answers.
func hashRequest(req *llm.Request) [32]byte {
	b, err := json.Marshal(struct {
		P  llm.Purpose
		M  string
		S  string
		Ms []llm.Message
		T  []llm.Tool
		O  *llm.OutputSchema
		Tp *float64
		Sd *int64
	}{req.Purpose, req.Model, req.System, req.Messages, req.Tools, req.Output, req.Temperature, req.Seed})
	if err != nil {
		// Only invalid RawMessage bytes can fail; fall back to a hash of the
		// printable form, still deterministic.
		b = fmt.Appendf(nil, "%#v", *req)
	}
	return sha256.Sum256(b)
}

// tokens estimates tokens from characters (about four per token).
func tokens(chars int) int {
	if chars <= 0 {
		return 0
	}
	return (chars + 3) / 4
}

func estimatePrompt(req *llm.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content) + 4
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Args) + 8
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	if req.Output != nil {
		n += len(req.Output.Name) + len(req.Output.Schema)
	}
	return tokens(n)
}

func chunks(s string, size int) []string {
	var out []string
	for len(s) > 0 {
		if len(s) <= size {
			return append(out, s)
		}
		cut := strings.LastIndexByte(s[:size], ' ')
		if cut <= 0 {
			cut = size
			for cut < len(s) && !isRuneStart(s[cut]) {
				cut++
			}
		} else {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
