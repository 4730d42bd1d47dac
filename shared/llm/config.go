package llm

import (
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Target is one provider and model a tier may use.
type Target struct {
	Provider string
	Model    string
}

func (t Target) String() string { return t.Provider + ":" + t.Model }

// ParseTarget reads "provider:model". The model part may itself contain
// colons ("ollama:llama3.2:3b").
func ParseTarget(s string) (Target, error) {
	p, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || p == "" || m == "" {
		return Target{}, fmt.Errorf("llm: target %q must be written provider:model, e.g. scripted:scripted-small", s)
	}
	return Target{Provider: p, Model: m}, nil
}

// Config routes purposes to tiers and tiers to targets, and sets the retry
// policy. It can be written in Go or read from YAML (ParseConfig).
type Config struct {
	// Tiers maps a tier name to its targets ("provider:model") in failover
	// order.
	Tiers map[string][]string `yaml:"tiers" json:"tiers"`
	// Purposes maps a purpose to a tier. Unlisted purposes use DefaultTier.
	Purposes map[Purpose]string `yaml:"purposes" json:"purposes"`
	// DefaultTier serves requests whose purpose has no tier (default: the only tier, when
	// there is one).
	DefaultTier string `yaml:"default_tier" json:"defaultTier"`
	// Timeout bounds one upstream attempt (default 60s).
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// ProviderTimeouts overrides Timeout per provider name.
	ProviderTimeouts map[string]time.Duration `yaml:"provider_timeouts" json:"providerTimeouts"`
	Retry            RetryPolicy              `yaml:"retry" json:"retry"`
	// Breaker shapes the circuit breaker kept per target.
	Breaker BreakerPolicy `yaml:"breaker" json:"breaker"`
	// Degrade maps a tier to the cheaper tier a call moves to when a budget refuses every
	// target of the tier (none by default; services/ai-worker/llmsetup sets rich → cheap). Then the caller's static
	// fallback.
	Degrade map[string]string `yaml:"degrade" json:"degrade"`
}

// RetryPolicy governs retries of retryable errors on one target before the
// Registry fails over to the next.
type RetryPolicy struct {
	// MaxAttempts per target, first call included (default 3; 1 disables
	// retries).
	MaxAttempts int `yaml:"max_attempts" json:"maxAttempts"`
	// BaseDelay and MaxDelay shape exponential backoff with full jitter
	// (defaults 250ms and 8s).
	BaseDelay time.Duration `yaml:"base_delay" json:"baseDelay"`
	MaxDelay  time.Duration `yaml:"max_delay" json:"maxDelay"`
	// MaxRetryAfter bounds how long a provider's Retry-After is honoured
	// (default 30s). A longer Retry-After is not waited for: the Registry
	// fails over to the next target at once.
	MaxRetryAfter time.Duration `yaml:"max_retry_after" json:"maxRetryAfter"`
}

// ParseConfig reads a Config from YAML; unknown fields are errors.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("llm: routing config is not valid: %w", err)
	}
	return c, nil
}

func (c Config) withDefaults() Config {
	if c.DefaultTier == "" && len(c.Tiers) == 1 {
		for t := range c.Tiers {
			c.DefaultTier = t
		}
	}
	if c.Timeout <= 0 {
		c.Timeout = 60 * time.Second
	}
	r := &c.Retry
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 3
	}
	if r.BaseDelay <= 0 {
		r.BaseDelay = 250 * time.Millisecond
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = 8 * time.Second
	}
	if r.MaxDelay < r.BaseDelay {
		r.MaxDelay = r.BaseDelay
	}
	if r.MaxRetryAfter <= 0 {
		r.MaxRetryAfter = 30 * time.Second
	}
	return c
}
