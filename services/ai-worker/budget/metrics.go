package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/actorpolicy"
)

// Metrics are the ledger's counters. Labels are budget names (from the file) and fixed
// words: never an actor, location or region id. Per-subject budgets are reported in
// aggregate (how many subjects are above 80 %), and per subject through worldgate budget.
type Metrics struct {
	reservations *prometheus.CounterVec
	refusals     *prometheus.CounterVec
	settlements  *prometheus.CounterVec
	settledUSD   prometheus.Counter
	latency      prometheus.Histogram
}

// NewMetrics registers the ledger's metrics on reg:
//
//	worldgate_budget_reservations_total{outcome}   admitted | spent | low | paused
//	worldgate_budget_refusals_total{budget,reason} reason = spent | low | paused
//	worldgate_budget_settlements_total{outcome}    settled | released
//	worldgate_budget_settled_usd_total
//	worldgate_budget_reservation_seconds
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("budget: NewMetrics needs a registerer")
	}
	m := &Metrics{
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "worldgate", Name: "budget_reservations_total",
			Help: "Budget reservations made before LLM calls, by outcome: admitted, or refused because a budget was spent, low (a cheaper tier serves the call) or paused."}, []string{"outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "worldgate", Name: "budget_refusals_total",
			Help: "LLM calls a budget refused before they were made, by budget and reason (spent, low, paused)."}, []string{"budget", "reason"}),
		settlements: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "worldgate", Name: "budget_settlements_total",
			Help: "Budget reservations closed after the call: settled with the actual cost, or released because the call failed."}, []string{"outcome"}),
		settledUSD: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "worldgate", Name: "budget_settled_usd_total",
			Help: "USD settled against budgets (the actual cost of the calls they admitted)."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "worldgate", Name: "budget_reservation_seconds",
			Help:    "Time to reserve an admitted call's estimate in every budget it falls under (KV compare-and-set).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}}),
	}
	for _, c := range []prometheus.Collector{m.reservations, m.refusals, m.settlements, m.settledUSD, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("budget: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) refused(budget string, v Verdict) {
	if m == nil {
		return
	}
	m.reservations.WithLabelValues(v.String()).Inc()
	m.refusals.WithLabelValues(budget, v.String()).Inc()
}

func (m *Metrics) admitted(took time.Duration) {
	if m == nil {
		return
	}
	m.reservations.WithLabelValues("admitted").Inc()
	m.latency.Observe(took.Seconds())
}

func (m *Metrics) settled(outcome string, actual Usage) {
	if m == nil {
		return
	}
	m.settlements.WithLabelValues(outcome).Inc()
	m.settledUSD.Add(USD(actual.Micros))
}

// Collector exports every budget's state at scrape time, read from KV (so every replica
// reports the same shared windows; dashboards take max by budget):
//
//	worldgate_budget_limit_usd{budget,window}, worldgate_budget_limit_tokens{budget,window}
//	worldgate_budget_used_usd{budget,window}, worldgate_budget_used_tokens{budget,window}
//	worldgate_budget_remaining_ratio{budget,window}   1 - used/limit (global, purpose and model budgets)
//	worldgate_budget_paused{budget}
//	worldgate_budget_subjects{budget}, worldgate_budget_subjects_above_ratio{budget,ratio="0.8"}
//	worldgate_budget_actors_tightened   actors whose policy tightens them now (repeat offenders)
type Collector struct {
	b   Buckets
	log *slog.Logger
	now func() time.Time

	limitUSD, limitTokens, usedUSD, usedTokens, remaining, paused, subjects, above, tightened *prometheus.Desc
}

// NewCollector returns a collector over the ledger's buckets.
func NewCollector(b Buckets, log *slog.Logger) *Collector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("worldgate_budget_"+name, help, labels, nil)
	}
	return &Collector{b: b, log: log, now: time.Now,
		limitUSD:    d("limit_usd", "A budget's USD limit per window in force (the file's, or an operator's override); 0: no USD limit.", "budget", "window"),
		limitTokens: d("limit_tokens", "A budget's token limit per window in force; 0: no token limit.", "budget", "window"),
		usedUSD:     d("used_usd", "USD used in a budget's current window (settled calls plus outstanding reservations); for per-subject budgets the fullest subject's.", "budget", "window"),
		usedTokens:  d("used_tokens", "Tokens used in a budget's current window; for per-subject budgets the fullest subject's.", "budget", "window"),
		remaining:   d("remaining_ratio", "Share of a global, purpose or model budget left in its current window (1 - used/limit, the tighter of USD and tokens).", "budget", "window"),
		paused:      d("paused", "1 when an operator paused the budget (kill switch): calls under it get static fallback content.", "budget"),
		subjects:    d("subjects", "Actors, locations or regions with a window in a per-subject budget's current window.", "budget"),
		above:       d("subjects_above_ratio", "Subjects of a per-subject budget above the given share of their limit in the current window.", "budget", "ratio"),
		tightened:   d("actors_tightened", "Actors whose policy tightens them now (a multiplier below 1 still decaying, or a cool-down): repeat offenders and operators' per-actor changes."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.limitUSD, c.limitTokens, c.usedUSD, c.usedTokens, c.remaining, c.paused, c.subjects, c.above, c.tightened} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now := c.now()
	reports, err := Reports(ctx, c.b, now, "")
	if err != nil {
		c.log.Warn("budget: cannot read the budgets for /metrics", "error", err)
		return
	}
	if ps, err := actorpolicy.List(ctx, c.b.JS, c.b.Control); err == nil {
		n := 0
		for _, p := range ps {
			if p.Active(now) {
				n++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.tightened, prometheus.GaugeValue, float64(n))
	} else {
		c.log.Warn("budget: cannot read the actor policies for /metrics", "error", err)
	}
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, r := range reports {
		name, win := r.Budget.Name, string(r.Budget.Window)
		g(c.limitUSD, USD(r.Limit.Micros), name, win)
		g(c.limitTokens, float64(r.Limit.Tokens), name, win)
		g(c.usedUSD, USD(r.Used.Micros), name, win)
		g(c.usedTokens, float64(r.Used.Tokens), name, win)
		p := 0.0
		if r.Paused() {
			p = 1
		}
		g(c.paused, p, name)
		if r.Budget.Scope.PerSubject() {
			g(c.subjects, float64(r.Subjects), name)
			g(c.above, float64(r.Above80), name, "0.8")
		} else {
			g(c.remaining, max(1-r.Ratio, 0), name, win)
		}
	}
}
