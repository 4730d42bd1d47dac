package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the provider layer's Prometheus collectors. One set serves all
// providers of a process; NewMetrics reuses collectors already registered on
// the same Registerer, so building two registries on one Registerer works.
type Metrics struct {
	requests       *prometheus.CounterVec
	tokens         *prometheus.CounterVec
	cost           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	circuitState   *prometheus.GaugeVec
	circuitChanges *prometheus.CounterVec
	skipped        *prometheus.CounterVec
	downgrades     *prometheus.CounterVec
}

// NewMetrics creates and registers the collectors on reg:
//
//	worldgate_ai_requests_total{purpose,provider,model,outcome}
//	worldgate_ai_tokens_total{purpose,model,type}     type = prompt|completion|cached|cache_write
//	worldgate_ai_cost_usd_total{purpose,model}
//	worldgate_ai_latency_seconds{purpose,model}       histogram
//	worldgate_ai_circuit_state{provider,model}        0 closed, 1 half-open, 2 open
//	worldgate_ai_circuit_transitions_total{provider,model,to}
//	worldgate_ai_targets_skipped_total{purpose,provider,model,reason}   reason = circuit_open|budget_exceeded
//	worldgate_ai_downgrades_total{purpose,from,to}    a budget moved a call to a cheaper tier
//
// outcome is "ok" or the normalized ErrorKind. Labels never carry ids.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("llm: NewMetrics needs a prometheus.Registerer")
	}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "worldgate", Name: "ai_requests_total",
			Help: "LLM provider calls by purpose, provider, model and outcome (ok or the normalized error kind).",
		}, []string{"purpose", "provider", "model", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "worldgate", Name: "ai_tokens_total",
			Help: "LLM tokens by purpose, model and type (prompt includes cached and cache_write: the shares read from and written to the provider's prompt cache).",
		}, []string{"purpose", "model", "type"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "worldgate", Name: "ai_cost_usd_total",
			Help: "LLM spend in USD from the price table, by purpose and model.",
		}, []string{"purpose", "model"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "worldgate", Name: "ai_latency_seconds",
			Help:    "LLM call latency (one upstream attempt) by purpose and model.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80},
		}, []string{"purpose", "model"}),
		circuitState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "worldgate", Name: "ai_circuit_state",
			Help: "Circuit breaker of each LLM target (provider and model) in this process: 0 closed, 1 half-open (probing), 2 open (failover skips it).",
		}, []string{"provider", "model"}),
		circuitChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "worldgate", Name: "ai_circuit_transitions_total",
			Help: "Circuit breaker state changes of each LLM target, by the state entered.",
		}, []string{"provider", "model", "to"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "worldgate", Name: "ai_targets_skipped_total",
			Help: "LLM targets passed over without a call: their circuit was open, or a budget refused the call's reservation.",
		}, []string{"purpose", "provider", "model", "reason"}),
		downgrades: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "worldgate", Name: "ai_downgrades_total",
			Help: "Calls served by a cheaper tier than asked for because a budget refused the richer one.",
		}, []string{"purpose", "from", "to"}),
	}
	var err error
	if m.circuitState, err = register(reg, m.circuitState); err != nil {
		return nil, err
	}
	if m.circuitChanges, err = register(reg, m.circuitChanges); err != nil {
		return nil, err
	}
	if m.skipped, err = register(reg, m.skipped); err != nil {
		return nil, err
	}
	if m.downgrades, err = register(reg, m.downgrades); err != nil {
		return nil, err
	}
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.tokens, err = register(reg, m.tokens); err != nil {
		return nil, err
	}
	if m.cost, err = register(reg, m.cost); err != nil {
		return nil, err
	}
	if m.latency, err = register(reg, m.latency); err != nil {
		return nil, err
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("llm: register metrics: %w", err)
	}
	return c, nil
}

// Instrument wraps p so that every answer is priced from prices (CostUSD,
// PriceMissing), its Provider, Model and Latency are filled in, and m (if
// not nil) records it. The Registry applies it once to every provider it
// holds; adapters do neither pricing nor metrics themselves.
func Instrument(p Provider, prices *PriceTable, m *Metrics, logger *slog.Logger) Provider {
	if logger == nil {
		logger = slog.Default()
	}
	return &metered{next: p, prices: prices, m: m, log: logger}
}

type metered struct {
	next   Provider
	prices *PriceTable
	m      *Metrics
	log    *slog.Logger
	warned sync.Map // "provider:model" -> struct{}: warn once per unpriced model
}

func (p *metered) Name() string               { return p.next.Name() }
func (p *metered) Capabilities() Capabilities { return p.next.Capabilities() }

func (p *metered) Complete(ctx context.Context, req *Request) (*Response, error) {
	start := time.Now()
	resp, err := p.next.Complete(ctx, req)
	return p.observe(req, resp, err, time.Since(start))
}

func (p *metered) Stream(ctx context.Context, req *Request, onDelta func(Delta) error) (*Response, error) {
	start := time.Now()
	resp, err := p.next.Stream(ctx, req, onDelta)
	return p.observe(req, resp, err, time.Since(start))
}

func (p *metered) observe(req *Request, resp *Response, err error, took time.Duration) (*Response, error) {
	purpose := string(req.Purpose)
	if purpose == "" {
		purpose = "unspecified"
	}
	model := req.Model
	if err != nil {
		if p.m != nil {
			p.m.requests.WithLabelValues(purpose, p.next.Name(), model, string(KindOf(err))).Inc()
			p.m.latency.WithLabelValues(purpose, model).Observe(took.Seconds())
		}
		return resp, err
	}
	if resp == nil {
		return nil, &Error{Kind: KindProvider, Provider: p.next.Name(), Message: "provider returned neither an answer nor an error"}
	}
	if resp.Provider == "" {
		resp.Provider = p.next.Name()
	}
	if resp.Model == "" {
		resp.Model = model
	}
	if resp.Latency <= 0 {
		resp.Latency = took
	}
	// Price by the model we asked for: providers often answer with a dated
	// snapshot id ("gpt-4o-mini-2024-07-18") that the table does not list.
	usd, known := p.prices.Cost(resp.Provider, model, resp.Usage)
	if !known && resp.Model != model {
		usd, known = p.prices.Cost(resp.Provider, resp.Model, resp.Usage)
	}
	resp.CostUSD, resp.PriceMissing = usd, !known
	if !known {
		key := resp.Provider + ":" + model
		if _, seen := p.warned.LoadOrStore(key, struct{}{}); !seen {
			p.log.Warn("llm: model has no price; its calls are costed at 0 USD. Add it to the price table.",
				"ai.provider", resp.Provider, "ai.model", model)
		}
	}
	if p.m != nil {
		p.m.requests.WithLabelValues(purpose, resp.Provider, model, "ok").Inc()
		p.m.latency.WithLabelValues(purpose, model).Observe(took.Seconds())
		u := resp.Usage
		p.m.tokens.WithLabelValues(purpose, model, "prompt").Add(float64(max(u.PromptTokens, 0)))
		p.m.tokens.WithLabelValues(purpose, model, "completion").Add(float64(max(u.CompletionTokens, 0)))
		p.m.tokens.WithLabelValues(purpose, model, "cached").Add(float64(max(u.CachedPromptTokens, 0)))
		p.m.tokens.WithLabelValues(purpose, model, "cache_write").Add(float64(max(u.CacheWriteTokens, 0)))
		p.m.cost.WithLabelValues(purpose, model).Add(usd)
	}
	return resp, nil
}
