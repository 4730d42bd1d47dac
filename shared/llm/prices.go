package llm

import (
	_ "embed"
	"fmt"
	"maps"
	"math"
	"os"

	"gopkg.in/yaml.v3"
)

//go:embed prices.yaml
var embeddedPrices []byte

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Input  float64 `yaml:"input" json:"input"`
	Output float64 `yaml:"output" json:"output"`
	// CachedInput prices prompt tokens served from the provider's cache.
	// Nil in YAML means "same as Input".
	CachedInput *float64 `yaml:"cached_input" json:"cachedInput,omitempty"`
	// CacheWrite prices prompt tokens written to the provider's cache (Anthropic bills
	// them at 1.25 times input for the 5-minute cache). Nil means "same as Input".
	CacheWrite *float64 `yaml:"cache_write" json:"cacheWrite,omitempty"`
}

// Cost prices a usage: prompt tokens neither read from nor written to the cache at Input,
// cache reads at CachedInput, cache writes at CacheWrite, completion tokens at Output.
func (p Price) Cost(u Usage) float64 {
	prompt := max(u.PromptTokens, 0)
	cached := min(max(u.CachedPromptTokens, 0), prompt)
	written := min(max(u.CacheWriteTokens, 0), prompt-cached)
	cachedRate := p.Input
	if p.CachedInput != nil {
		cachedRate = *p.CachedInput
	}
	writeRate := p.Input
	if p.CacheWrite != nil {
		writeRate = *p.CacheWrite
	}
	usd := (float64(prompt-cached-written)*p.Input +
		float64(cached)*cachedRate +
		float64(written)*writeRate +
		float64(u.CompletionTokens)*p.Output) / 1e6
	if math.IsNaN(usd) || usd < 0 {
		return 0
	}
	return usd
}

// PriceTable maps models to prices. The zero value prices nothing; use
// DefaultPrices for the embedded table. A PriceTable is read-only once built.
type PriceTable struct {
	models map[string]Price
}

type priceFile struct {
	Models map[string]Price `yaml:"models"`
}

// ParsePrices reads a price table in the prices.yaml format.
func ParsePrices(data []byte) (*PriceTable, error) {
	var f priceFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("llm: price table is not valid YAML: %w", err)
	}
	for name, p := range f.Models {
		if p.Input < 0 || p.Output < 0 || (p.CachedInput != nil && *p.CachedInput < 0) || (p.CacheWrite != nil && *p.CacheWrite < 0) {
			return nil, fmt.Errorf("llm: price of %q is negative; prices are USD per million tokens", name)
		}
	}
	if f.Models == nil {
		f.Models = map[string]Price{}
	}
	return &PriceTable{models: f.Models}, nil
}

// DefaultPrices returns the embedded price table (prices.yaml).
func DefaultPrices() *PriceTable {
	t, err := ParsePrices(embeddedPrices)
	if err != nil {
		// The embedded file is tested; an empty table beats a panic.
		return &PriceTable{models: map[string]Price{}}
	}
	return t
}

// LoadPrices returns the embedded table overridden, model by model, by the
// table in the file at path.
func LoadPrices(path string) (*PriceTable, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llm: read price table: %w", err)
	}
	over, err := ParsePrices(data)
	if err != nil {
		return nil, fmt.Errorf("llm: price table %s: %w", path, err)
	}
	return DefaultPrices().With(over), nil
}

// With returns a new table: t's entries overridden by over's.
func (t *PriceTable) With(over *PriceTable) *PriceTable {
	m := map[string]Price{}
	if t != nil {
		maps.Copy(m, t.models)
	}
	if over != nil {
		maps.Copy(m, over.models)
	}
	return &PriceTable{models: m}
}

// Set returns a new table with one model's price set.
func (t *PriceTable) Set(model string, p Price) *PriceTable {
	return t.With(&PriceTable{models: map[string]Price{model: p}})
}

// Lookup finds the price of model as served by provider: "provider:model"
// first, then "model", then "provider:*".
func (t *PriceTable) Lookup(provider, model string) (Price, bool) {
	if t == nil {
		return Price{}, false
	}
	if provider != "" {
		if p, ok := t.models[provider+":"+model]; ok {
			return p, true
		}
	}
	if p, ok := t.models[model]; ok {
		return p, true
	}
	if provider != "" {
		if p, ok := t.models[provider+":*"]; ok {
			return p, true
		}
	}
	return Price{}, false
}

// Cost prices u for model on provider. known is false when the model has no
// entry; the cost is then 0.
func (t *PriceTable) Cost(provider, model string, u Usage) (usd float64, known bool) {
	p, ok := t.Lookup(provider, model)
	if !ok {
		return 0, false
	}
	return p.Cost(u), true
}
