package llm

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerPolicy shapes the circuit breaker the Registry keeps per target (provider and
// model). A target whose calls fail repeatedly is skipped by failover while its circuit is
// open; after OpenFor one probe call is let through (half-open): success closes the circuit,
// failure opens it again.
type BreakerPolicy struct {
	// Failures is how many consecutive failed calls open the circuit (default 5). An
	// exhausted quota, an unknown model or a refused key open it at once: they do not pass
	// by themselves within seconds.
	Failures int `yaml:"failures" json:"failures"`
	// OpenFor is how long an open circuit refuses calls before a probe (default 30s).
	OpenFor time.Duration `yaml:"open_for" json:"openFor"`
	// Probes is how many calls a half-open circuit lets through at once (default 1).
	Probes int `yaml:"probes" json:"probes"`
	// Disabled turns the breakers off (every call goes to the provider).
	Disabled bool `yaml:"disabled" json:"disabled"`
}

func (p BreakerPolicy) withDefaults() BreakerPolicy {
	if p.Failures <= 0 {
		p.Failures = 5
	}
	if p.OpenFor <= 0 {
		p.OpenFor = 30 * time.Second
	}
	if p.Probes <= 0 {
		p.Probes = 1
	}
	return p
}

// Circuit states, as reported by Health and the worldgate_ai_circuit_state gauge (0, 1, 2).
const (
	CircuitClosed   = "closed"
	CircuitHalfOpen = "half-open"
	CircuitOpen     = "open"
)

// TargetHealth is one target's circuit as seen by this process.
type TargetHealth struct {
	Target string `json:"target"` // provider:model
	State  string `json:"state"`  // closed, half-open or open
	// ConsecutiveFailures since the last success.
	ConsecutiveFailures uint32 `json:"consecutiveFailures"`
	// LastError and LastErrorKind describe the latest failure counted against the target.
	LastError     string    `json:"lastError,omitempty"`
	LastErrorKind ErrorKind `json:"lastErrorKind,omitempty"`
	LastErrorAt   time.Time `json:"lastErrorAt,omitzero"`
	// Since is when the circuit entered its state (zero: closed since start).
	Since time.Time `json:"since,omitzero"`
}

// breaker is one target's circuit.
type breaker struct {
	target Target
	cb     *gobreaker.CircuitBreaker[*Response]
	hard   atomic.Bool // the failure being recorded opens the circuit at once

	mu      sync.Mutex
	lastErr error
	lastAt  time.Time
	since   time.Time
}

type breakers struct {
	pol BreakerPolicy
	mu  sync.Mutex
	m   map[string]*breaker
	log *slog.Logger
	met *Metrics
	now func() time.Time
}

func newBreakers(pol BreakerPolicy, met *Metrics, log *slog.Logger) *breakers {
	return &breakers{pol: pol.withDefaults(), m: map[string]*breaker{}, log: log, met: met, now: time.Now}
}

// get returns t's breaker, creating it closed.
func (bs *breakers) get(t Target) *breaker {
	key := t.String()
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b, ok := bs.m[key]; ok {
		return b
	}
	b := &breaker{target: t}
	pol := bs.pol
	b.cb = gobreaker.NewCircuitBreaker[*Response](gobreaker.Settings{
		Name:        key,
		MaxRequests: uint32(pol.Probes),
		Timeout:     pol.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return b.hard.Load() || c.ConsecutiveFailures >= uint32(pol.Failures)
		},
		// Only failures that say the target is unhealthy count; the request's own faults
		// (and cancellations) neither count as failures nor reset the streak.
		IsSuccessful: func(err error) bool { return err == nil },
		IsExcluded:   func(err error) bool { return err != nil && !healthFailure(err) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			b.mu.Lock()
			b.since = bs.now()
			last := b.lastErr
			b.mu.Unlock()
			if bs.met != nil {
				bs.met.circuitState.WithLabelValues(t.Provider, t.Model).Set(float64(stateValue(to)))
				bs.met.circuitChanges.WithLabelValues(t.Provider, t.Model, stateName(to)).Inc()
			}
			attrs := []any{"ai.provider", t.Provider, "ai.model", t.Model, "from", stateName(from), "to", stateName(to)}
			if last != nil {
				attrs = append(attrs, "error", last.Error())
			}
			if to == gobreaker.StateOpen {
				bs.log.Warn(fmt.Sprintf("llm: circuit of %s opened: failover skips it for %s, then one probe call", key, pol.OpenFor), attrs...)
			} else {
				bs.log.Info("llm: circuit of "+key+" is "+stateName(to), attrs...)
			}
		},
	})
	if bs.met != nil {
		bs.met.circuitState.WithLabelValues(t.Provider, t.Model).Set(0)
	}
	bs.m[key] = b
	return b
}

// open reports whether t's circuit refuses calls now (open, not yet due for a probe).
func (bs *breakers) open(t Target) bool {
	if bs.pol.Disabled {
		return false
	}
	return bs.get(t).cb.State() == gobreaker.StateOpen
}

// run makes call under t's breaker. A refused call comes back as KindCircuitOpen.
func (bs *breakers) run(t Target, call func() (*Response, error)) (*Response, error) {
	if bs.pol.Disabled {
		return call()
	}
	b := bs.get(t)
	resp, err := b.cb.Execute(func() (*Response, error) {
		resp, err := call()
		if err != nil && healthFailure(err) {
			b.hard.Store(hardFailure(err))
			b.mu.Lock()
			b.lastErr, b.lastAt = err, bs.now()
			b.mu.Unlock()
		} else {
			b.hard.Store(false)
		}
		return resp, err
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, &Error{Kind: KindCircuitOpen, Provider: t.Provider,
			Message: fmt.Sprintf("the circuit of %s is %s after repeated failures; not calling it", t, stateName(b.cb.State()))}
	}
	return resp, err
}

// health reports every breaker, sorted by target.
func (bs *breakers) health() []TargetHealth {
	bs.mu.Lock()
	list := make([]*breaker, 0, len(bs.m))
	for _, b := range bs.m {
		list = append(list, b)
	}
	bs.mu.Unlock()
	out := make([]TargetHealth, 0, len(list))
	for _, b := range list {
		c := b.cb.Counts()
		h := TargetHealth{Target: b.target.String(), State: stateName(b.cb.State()), ConsecutiveFailures: c.ConsecutiveFailures}
		b.mu.Lock()
		if b.lastErr != nil {
			h.LastError, h.LastErrorKind, h.LastErrorAt = b.lastErr.Error(), KindOf(b.lastErr), b.lastAt
		}
		h.Since = b.since
		b.mu.Unlock()
		if bs.pol.Disabled {
			h.State = CircuitClosed
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

func stateName(s gobreaker.State) string {
	switch s {
	case gobreaker.StateOpen:
		return CircuitOpen
	case gobreaker.StateHalfOpen:
		return CircuitHalfOpen
	}
	return CircuitClosed
}

func stateValue(s gobreaker.State) int {
	switch s {
	case gobreaker.StateOpen:
		return 2
	case gobreaker.StateHalfOpen:
		return 1
	}
	return 0
}
