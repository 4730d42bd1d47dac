package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Registry routes requests to providers. It is itself a Provider, so callers
// depend on the interface and tests can substitute a single provider.
//
// For each call it resolves the target list (a pinned "provider:model", or
// the tier of the request's purpose), then per target: retries retryable
// errors with jittered exponential backoff, honouring Retry-After up to a
// bound, under a per-attempt timeout; on a retryable error that outlives the
// retries it fails over to the next target. Invalid requests, authentication
// and context-length errors are returned at once. With an OutputSchema it
// validates the answer and makes one repair reprompt carrying the validation
// error. Every attempt is priced and measured by the Instrument decorator.
type Registry struct {
	cfg       Config
	providers map[string]*entry
	order     []string
	tiers     map[string][]Target
	log       *slog.Logger
	sleep     func(context.Context, time.Duration) error
	prices    *PriceTable
	metrics   *Metrics
	brk       *breakers
	admit     Admitter
}

type entry struct {
	p       Provider // instrumented
	raw     Provider
	caps    Capabilities
	timeout time.Duration
}

// Option configures a Registry.
type Option func(*registryOptions)

type registryOptions struct {
	providers []Provider
	prices    *PriceTable
	reg       prometheus.Registerer
	metrics   *Metrics
	logger    *slog.Logger
	admit     Admitter
}

// WithProviders adds providers, addressed by their Name().
func WithProviders(ps ...Provider) Option {
	return func(o *registryOptions) { o.providers = append(o.providers, ps...) }
}

// WithPrices sets the price table (default: the embedded prices.yaml).
func WithPrices(t *PriceTable) Option { return func(o *registryOptions) { o.prices = t } }

// WithMetrics records the worldgate_ai_* metrics on reg.
func WithMetrics(reg prometheus.Registerer) Option { return func(o *registryOptions) { o.reg = reg } }

// WithAdmitter makes every call ask a (budget) Admitter before it is made.
func WithAdmitter(a Admitter) Option { return func(o *registryOptions) { o.admit = a } }

// WithLogger sets the logger for retries, failovers and price warnings.
func WithLogger(l *slog.Logger) Option { return func(o *registryOptions) { o.logger = l } }

// NewRegistry builds a registry from cfg and the given providers. It checks
// that every tier names registered providers and every purpose a known tier.
func NewRegistry(cfg Config, opts ...Option) (*Registry, error) {
	var o registryOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.prices == nil {
		o.prices = DefaultPrices()
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	if o.reg != nil {
		m, err := NewMetrics(o.reg)
		if err != nil {
			return nil, err
		}
		o.metrics = m
	}
	cfg = cfg.withDefaults()
	r := &Registry{
		cfg:       cfg,
		providers: map[string]*entry{},
		tiers:     map[string][]Target{},
		log:       o.logger,
		sleep:     sleepCtx,
		prices:    o.prices,
		metrics:   o.metrics,
		brk:       newBreakers(cfg.Breaker, o.metrics, o.logger),
		admit:     o.admit,
	}
	for _, p := range o.providers {
		if p == nil {
			return nil, errors.New("llm: NewRegistry was given a nil provider")
		}
		name := p.Name()
		if name == "" || strings.Contains(name, ":") {
			return nil, fmt.Errorf("llm: provider name %q must be non-empty and contain no colon", name)
		}
		if _, dup := r.providers[name]; dup {
			return nil, fmt.Errorf("llm: two providers are named %q; give each instance its own name", name)
		}
		timeout := cfg.Timeout
		if t, ok := cfg.ProviderTimeouts[name]; ok && t > 0 {
			timeout = t
		}
		r.providers[name] = &entry{
			p:       Instrument(p, o.prices, o.metrics, o.logger),
			raw:     p,
			caps:    p.Capabilities(),
			timeout: timeout,
		}
		r.order = append(r.order, name)
	}
	for tier, specs := range cfg.Tiers {
		if len(specs) == 0 {
			return nil, fmt.Errorf("llm: tier %q lists no targets", tier)
		}
		for _, s := range specs {
			t, err := ParseTarget(s)
			if err != nil {
				return nil, fmt.Errorf("llm: tier %q: %w", tier, err)
			}
			if _, ok := r.providers[t.Provider]; !ok {
				return nil, fmt.Errorf("llm: tier %q uses provider %q, which is not registered (registered: %s)",
					tier, t.Provider, strings.Join(r.order, ", "))
			}
			r.tiers[tier] = append(r.tiers[tier], t)
			r.brk.get(t)
		}
	}
	if _, ok := r.tiers[cfg.DefaultTier]; !ok {
		return nil, fmt.Errorf("llm: default tier %q is not configured; add it under tiers", cfg.DefaultTier)
	}
	for from, to := range cfg.Degrade {
		if _, ok := r.tiers[from]; !ok {
			return nil, fmt.Errorf("llm: degrade names tier %q, which is not configured", from)
		}
		if _, ok := r.tiers[to]; !ok {
			return nil, fmt.Errorf("llm: degrade moves tier %q to tier %q, which is not configured", from, to)
		}
	}
	for purpose, tier := range cfg.Purposes {
		if _, ok := r.tiers[tier]; !ok {
			return nil, fmt.Errorf("llm: purpose %q uses tier %q, which is not configured", purpose, tier)
		}
	}
	return r, nil
}

// Name implements Provider.
func (r *Registry) Name() string { return "registry" }

// Capabilities implements Provider: the registry emulates JSON-schema output
// and streaming for providers that lack them; tools need a provider that has
// them.
func (r *Registry) Capabilities() Capabilities {
	c := Capabilities{JSONSchema: true, Streaming: true}
	for _, e := range r.providers {
		c.Tools = c.Tools || e.caps.Tools
		c.MaxContext = max(c.MaxContext, e.caps.MaxContext)
	}
	return c
}

// ProviderInfo describes a registered provider.
type ProviderInfo struct {
	Name         string
	Capabilities Capabilities
	Timeout      time.Duration
}

// Providers lists the registered providers in registration order.
func (r *Registry) Providers() []ProviderInfo {
	out := make([]ProviderInfo, 0, len(r.order))
	for _, n := range r.order {
		e := r.providers[n]
		out = append(out, ProviderInfo{Name: n, Capabilities: e.caps, Timeout: e.timeout})
	}
	return out
}

// Tiers returns the tier names, sorted.
func (r *Registry) Tiers() []string {
	out := make([]string, 0, len(r.tiers))
	for t := range r.tiers {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Targets returns the targets a request would be tried on, in order.
func (r *Registry) Targets(req *Request) ([]Target, error) {
	if req == nil {
		return nil, &Error{Kind: KindInvalid, Provider: r.Name(), Message: "request is nil"}
	}
	if req.Model != "" {
		if t, err := ParseTarget(req.Model); err == nil {
			if _, ok := r.providers[t.Provider]; ok {
				return []Target{t}, nil
			}
		}
		// A bare model id: the configured targets serving it, in tier order.
		var out []Target
		for _, tier := range r.Tiers() {
			for _, t := range r.tiers[tier] {
				if t.Model == req.Model && !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
		}
		if len(out) == 0 {
			return nil, &Error{Kind: KindInvalid, Provider: r.Name(),
				Message: fmt.Sprintf("model %q is not served by any configured tier; pin it as provider:model", req.Model)}
		}
		return out, nil
	}
	tier := r.tierOf(req)
	ts, ok := r.tiers[tier]
	if !ok {
		return nil, &Error{Kind: KindInvalid, Provider: r.Name(),
			Message: fmt.Sprintf("tier %q is not configured (tiers: %s)", tier, strings.Join(r.Tiers(), ", "))}
	}
	return ts, nil
}

// tierOf is the tier a request asks for: its Tier, else its purpose's, else the default.
func (r *Registry) tierOf(req *Request) string {
	tier := req.Tier
	if tier == "" {
		tier = r.cfg.Purposes[req.Purpose]
	}
	if tier == "" {
		tier = r.cfg.DefaultTier
	}
	return tier
}

// Complete implements Provider.
func (r *Registry) Complete(ctx context.Context, req *Request) (*Response, error) {
	return r.call(ctx, req, nil)
}

// Stream implements Provider. Deltas are delivered as they arrive; a call is
// retried or failed over only while no delta has been delivered. When a
// schema repair is needed after streaming, the repaired answer is in the
// returned Response only.
func (r *Registry) Stream(ctx context.Context, req *Request, onDelta func(Delta) error) (*Response, error) {
	if onDelta == nil {
		onDelta = func(Delta) error { return nil }
	}
	return r.call(ctx, req, onDelta)
}

func (r *Registry) call(ctx context.Context, req *Request, onDelta func(Delta) error) (*Response, error) {
	if err := CheckRequest(req); err != nil {
		return nil, err
	}
	targets, err := r.Targets(req)
	if err != nil {
		return nil, err
	}
	if req.Output != nil {
		if _, err := CompileSchema(req.Output.Schema); err != nil {
			return nil, &Error{Kind: KindInvalid, Provider: r.Name(),
				Message: fmt.Sprintf("output schema %q: %v", req.Output.Name, err)}
		}
	}
	var (
		attempts   int
		emitted    bool
		downgrades []Downgrade
	)
	deliver := onDelta
	if onDelta != nil {
		deliver = func(d Delta) error {
			emitted = true
			return onDelta(d)
		}
	}
	tier := ""
	if req.Model == "" {
		tier = r.tierOf(req)
	}
	tried := map[string]bool{}
	for {
		tried[tier] = true
		next := r.cfg.Degrade[tier]
		degradable := tier != "" && next != "" && !tried[next]
		resp, n, err := r.tryTargets(ctx, req, tier, targets, degradable, deliver, &emitted)
		attempts += n
		if err == nil {
			resp.Attempts, resp.Tier, resp.Downgrades = attempts, tier, downgrades
			return resp, nil
		}
		// A budget refused this tier: a cheaper one may still be paid for.
		if KindOf(err) != KindBudget || !degradable || emitted || ctx.Err() != nil {
			return nil, err
		}
		downgrades = append(downgrades, Downgrade{From: tier, To: next, Reason: err.Error()})
		r.log.Warn("llm: a budget refused the tier; downgrading to a cheaper one",
			"ai.purpose", req.Purpose, "ai.tier.from", tier, "ai.tier.to", next, "error", err)
		if r.metrics != nil {
			r.metrics.downgrades.WithLabelValues(purposeLabel(req.Purpose), tier, next).Inc()
		}
		tier = next
		targets = r.tiers[tier]
	}
}

// tryTargets tries a tier's targets in order: it skips those whose circuit is open or that a
// budget will not pay for, retries retryable errors on each, and fails over on errors that
// belong to the target. When any target was refused by a budget and none could serve, the
// budget's refusal is returned, so the caller may downgrade.
func (r *Registry) tryTargets(ctx context.Context, req *Request, tier string, targets []Target, degradable bool,
	deliver func(Delta) error, emitted *bool) (*Response, int, error) {
	var (
		lastErr, budgetErr error
		attempts           int
	)
	for i, t := range targets {
		e := r.providers[t.Provider]
		if len(req.Tools) > 0 && !e.caps.Tools {
			lastErr = &Error{Kind: KindInvalid, Provider: t.Provider,
				Message: "the request offers tools and this provider does not support tool calling"}
			continue
		}
		if r.brk.open(t) {
			lastErr = &Error{Kind: KindCircuitOpen, Provider: t.Provider,
				Message: fmt.Sprintf("the circuit of %s is open after repeated failures; skipped", t)}
			r.skip(req, t, KindCircuitOpen)
			continue
		}
		preq := prepare(req, t, e.caps)
		ticket, err := r.reserve(ctx, req, preq, tier, t, degradable)
		if err != nil {
			if ctx.Err() != nil {
				return nil, attempts, TransportError(r.Name(), ctx.Err())
			}
			lastErr, budgetErr = err, err
			r.skip(req, t, KindBudget)
			continue
		}
		resp, n, err := r.attempts(ctx, e, t, preq, deliver, emitted)
		attempts += n
		// The call is settled at its own cost before any repair: a repair is another paid
		// call, which reserves its own estimate (enforceSchema).
		r.settle(ctx, req, t, ticket, resp, err)
		if err == nil && req.Output != nil && len(resp.ToolCalls) == 0 {
			var m int
			resp, m, err = r.enforceSchema(ctx, e, t, preq, resp, tier, degradable)
			attempts += m
		}
		if err == nil {
			return resp, attempts, nil
		}
		lastErr = err
		if KindOf(err) == KindBudget && !*emitted && ctx.Err() == nil {
			// A budget refused the repair: another target, or a cheaper tier, may be paid for.
			budgetErr = err
			r.skip(req, t, KindBudget)
			continue
		}
		if !FailsOver(err) || ctx.Err() != nil || *emitted {
			return nil, attempts, err
		}
		if i+1 < len(targets) {
			r.log.Warn("llm: failing over to the next provider",
				"ai.purpose", req.Purpose, "ai.from", t.String(), "ai.to", targets[i+1].String(), "error", err)
		}
	}
	if budgetErr != nil {
		return nil, attempts, budgetErr
	}
	if lastErr == nil {
		lastErr = &Error{Kind: KindUnavailable, Provider: r.Name(), Message: "no provider could serve the request"}
	}
	return nil, attempts, lastErr
}

// reserve asks the Admitter (if any) to pay for the call preq on t: a nil ticket without
// one. A refusal, or a ledger that cannot answer, is an *Error of KindBudget: nothing is paid
// for without a reservation.
func (r *Registry) reserve(ctx context.Context, req, preq *Request, tier string, t Target, degradable bool) (Ticket, error) {
	if r.admit == nil {
		return nil, nil
	}
	tk, err := r.admit.Admit(ctx, r.admission(req, preq, tier, t, degradable))
	if err != nil {
		var le *Error
		if !errors.As(err, &le) || le.Kind != KindBudget {
			err = &Error{Kind: KindBudget, Provider: t.Provider, Message: "budget ledger unavailable: " + err.Error(), Err: err}
		}
		return nil, err
	}
	return tk, nil
}

// settle closes a call's reservation: settled at what the call cost, or released when it
// failed. It runs even when the caller's context ended: the ledger must not keep an estimate
// the call no longer holds.
func (r *Registry) settle(ctx context.Context, req *Request, t Target, ticket Ticket, resp *Response, err error) {
	if ticket == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var serr error
	if err == nil {
		serr = ticket.Settle(sctx, resp.Usage, resp.CostUSD)
	} else {
		serr = ticket.Release(sctx)
	}
	if serr != nil {
		r.log.Warn("llm: could not settle the call's budget reservation", "ai.purpose", req.Purpose, "ai.target", t.String(), "error", serr)
	}
}

// admission describes the call on t for the Admitter: the prompt estimate plus the
// completion cap, priced at t's price.
func (r *Registry) admission(req, preq *Request, tier string, t Target, degradable bool) Admission {
	a := Admission{Purpose: req.Purpose, Tier: tier, Target: t, PromptTokens: EstimatePromptTokens(preq),
		CompletionTokens: req.MaxTokens, Degradable: degradable}
	if a.CompletionTokens <= 0 {
		a.CompletionTokens = DefaultCompletionCap
	}
	usd, known := r.prices.Cost(t.Provider, t.Model, Usage{PromptTokens: a.PromptTokens, CompletionTokens: a.CompletionTokens})
	a.EstimateUSD, a.PriceMissing = usd, !known
	return a
}

func (r *Registry) skip(req *Request, t Target, why ErrorKind) {
	if r.metrics != nil {
		r.metrics.skipped.WithLabelValues(purposeLabel(req.Purpose), t.Provider, t.Model, string(why)).Inc()
	}
}

func purposeLabel(p Purpose) string {
	if p == "" {
		return "unspecified"
	}
	return string(p)
}

// Health reports the circuit of every target this registry has called or may call.
func (r *Registry) Health() []TargetHealth { return r.brk.health() }

// attempts runs one target with retries. It returns the number of upstream
// calls made.
func (r *Registry) attempts(ctx context.Context, e *entry, t Target, req *Request, onDelta func(Delta) error, emitted *bool) (*Response, int, error) {
	pol := r.cfg.Retry
	var prev error
	for n := 1; ; n++ {
		resp, err := r.brk.run(t, func() (*Response, error) { return r.once(ctx, e, req, onDelta) })
		if err == nil {
			return resp, n, nil
		}
		var le *Error
		if !errors.As(err, &le) {
			// Not a provider failure: the delta callback's own error, passed
			// through unchanged.
			return nil, n, err
		}
		if le.Kind == KindCircuitOpen {
			// Opened by this call's failures (or half-open with its probe in flight): the
			// call was not made, so it does not count, and the failure that opened it is
			// the one to report.
			if prev != nil {
				return nil, n - 1, prev
			}
			return nil, n - 1, err
		}
		prev = err
		if ctx.Err() != nil || !le.Retryable() || n >= pol.MaxAttempts || *emitted {
			return nil, n, err
		}
		delay := backoff(pol, n)
		if le.RetryAfter > 0 {
			if le.RetryAfter > pol.MaxRetryAfter {
				// Waiting that long would stall the task; let the next
				// target serve it.
				return nil, n, err
			}
			// At least what the provider asked, plus a little jitter so
			// that replicas do not return in lockstep.
			delay = le.RetryAfter + time.Duration(rand.Int64N(int64(pol.BaseDelay)/4+1))
		}
		r.log.Warn("llm: retrying provider call",
			"ai.provider", e.raw.Name(), "ai.model", req.Model, "ai.purpose", req.Purpose,
			"attempt", n, "delay", delay, "error", err)
		if err := r.sleep(ctx, delay); err != nil {
			return nil, n, TransportError(r.Name(), err)
		}
	}
}

// once makes one upstream call under the per-attempt timeout and normalizes
// whatever comes back.
func (r *Registry) once(ctx context.Context, e *entry, req *Request, onDelta func(Delta) error) (resp *Response, err error) {
	actx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	defer func() {
		// A provider must never take the process down with it.
		if v := recover(); v != nil {
			resp, err = nil, &Error{Kind: KindProvider, Provider: e.raw.Name(), Message: fmt.Sprintf("provider panicked: %v", v)}
		}
	}()
	var cbErr error
	if onDelta != nil {
		wrapped := func(d Delta) error {
			if err := onDelta(d); err != nil {
				cbErr = err
				return err
			}
			return nil
		}
		if e.caps.Streaming {
			resp, err = e.p.Stream(actx, req, wrapped)
		} else {
			resp, err = e.p.Complete(actx, req)
			if err == nil && resp != nil && resp.Text != "" {
				err = wrapped(Delta{Text: resp.Text})
			}
		}
	} else {
		resp, err = e.p.Complete(actx, req)
	}
	if err == nil && resp == nil {
		err = &Error{Kind: KindProvider, Provider: e.raw.Name(), Message: "provider returned neither an answer nor an error"}
	}
	if err == nil {
		return resp, nil
	}
	if cbErr != nil && errors.Is(err, cbErr) {
		return nil, cbErr
	}
	if ctx.Err() != nil {
		return nil, TransportError(e.raw.Name(), ctx.Err())
	}
	var le *Error
	if !errors.As(err, &le) {
		le = &Error{Kind: KindProvider, Provider: e.raw.Name(), Message: err.Error(), Err: err}
	}
	if actx.Err() != nil && le.Kind != KindTimeout {
		// The per-attempt timeout fired; whatever the adapter made of it, it
		// is a timeout, and retryable.
		le = &Error{Kind: KindTimeout, Provider: e.raw.Name(), Status: le.Status,
			Message: fmt.Sprintf("no answer within %s", e.timeout), Err: err}
	}
	return nil, le
}

// enforceSchema validates a final answer against the request's output
// schema and, if it does not conform, reprompts once with the error.
func (r *Registry) enforceSchema(ctx context.Context, e *entry, t Target, req *Request, resp *Response, tier string, degradable bool) (*Response, int, error) {
	schema := req.Output.Schema
	text := ExtractJSON(resp.Text)
	verr := ValidateJSON(schema, []byte(text))
	if verr == nil {
		resp.Text = text
		return resp, 0, nil
	}
	r.log.Warn("llm: answer does not match the output schema; reprompting once",
		"ai.provider", e.raw.Name(), "ai.model", req.Model, "ai.purpose", req.Purpose, "error", verr)
	repair := req.Clone()
	repair.Messages = append(repair.Messages,
		Message{Role: RoleAssistant, Content: resp.Text},
		Message{Role: RoleUser, Content: RepairPrompt(req.Output.Name, verr)},
	)
	// The repair is a call of its own: it reserves its estimate (the longer prompt) first.
	ticket, err := r.reserve(ctx, repair, repair, tier, t, degradable)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, TransportError(r.Name(), ctx.Err())
		}
		return nil, 0, err
	}
	noEmit := false
	fixed, n, err := r.attempts(ctx, e, t, repair, nil, &noEmit)
	r.settle(ctx, repair, t, ticket, fixed, err)
	if err != nil {
		return nil, n, err
	}
	fixed.Usage = fixed.Usage.Add(resp.Usage)
	fixed.CostUSD += resp.CostUSD
	fixed.PriceMissing = fixed.PriceMissing || resp.PriceMissing
	fixed.Latency += resp.Latency
	fixed.Repaired = true
	text = ExtractJSON(fixed.Text)
	if verr := ValidateJSON(schema, []byte(text)); verr != nil {
		return nil, n, &Error{Kind: KindInvalidOutput, Provider: e.raw.Name(),
			Message: fmt.Sprintf("answer does not match output schema %q after one repair: %v", req.Output.Name, verr)}
	}
	fixed.Text = text
	return fixed, n, nil
}

// RepairPrompt is the user message of the schema repair reprompt.
func RepairPrompt(schemaName string, verr error) string {
	return fmt.Sprintf("Your previous reply does not conform to the JSON schema %q: %v\n"+
		"Reply again with only the corrected JSON document: no prose, no code fences.", schemaName, verr)
}

// prepare fixes the model for a target and, when the provider cannot
// constrain output itself, instructs it to produce JSON for the schema.
func prepare(req *Request, t Target, caps Capabilities) *Request {
	p := *req
	p.Model = t.Model
	if req.Output != nil && !caps.JSONSchema {
		p.System = strings.TrimSpace(req.System + "\n\n" + SchemaInstruction(req.Output))
	}
	return &p
}

// SchemaInstruction tells a model without native structured output what to
// produce.
func SchemaInstruction(o *OutputSchema) string {
	return fmt.Sprintf("When you give your final answer, reply with only a JSON document (no prose, no code fences) "+
		"that conforms to this JSON Schema named %q:\n%s", o.Name, string(o.Schema))
}

// CheckRequest rejects requests no provider could serve.
func CheckRequest(req *Request) error {
	bad := func(msg string) error { return &Error{Kind: KindInvalid, Message: msg} }
	if req == nil {
		return bad("request is nil")
	}
	if len(req.Messages) == 0 {
		return bad("request has no messages; put the task in a user message")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleUser, RoleAssistant:
		case RoleTool:
			if m.ToolCallID == "" {
				return bad(fmt.Sprintf("message %d is a tool result without the id of the tool call it answers", i))
			}
		default:
			return bad(fmt.Sprintf("message %d has role %q; use user, assistant or tool (the system prompt goes in Request.System)", i, m.Role))
		}
	}
	for _, t := range req.Tools {
		if t.Name == "" {
			return bad("a tool has no name")
		}
	}
	if req.Output != nil && (req.Output.Name == "" || len(req.Output.Schema) == 0) {
		return bad("output schema needs a name and a schema")
	}
	if req.MaxTokens < 0 {
		return bad("max tokens is negative")
	}
	return nil
}

func backoff(p RetryPolicy, attempt int) time.Duration {
	d := p.BaseDelay << min(attempt-1, 20)
	if d <= 0 || d > p.MaxDelay {
		d = p.MaxDelay
	}
	// "Equal jitter": a random delay in [d/2, d], so replicas spread out but
	// retries never bunch up at zero.
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
