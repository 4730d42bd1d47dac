// Package llmsetup builds an llm.Registry with its providers from
// configuration: the embedded scripted default, or a YAML file naming
// OpenAI-compatible and Anthropic endpoints. It exists so that package llm
// need not import its adapters.
package llmsetup

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/scripted"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/llm/anthropic"
	"github.com/worldgate/worldgate/shared/llm/openai"
)

// File is the YAML configuration of the provider layer:
//
//	providers:
//	  - name: ollama
//	    type: openai            # openai | anthropic | scripted
//	    base_url: http://localhost:11434/v1
//	    capabilities: {tools: true, json_schema: true, streaming: true, max_context: 8192}
//	  - name: anthropic
//	    type: anthropic
//	    api_key_env: ANTHROPIC_API_KEY
//	  - name: scripted
//	    type: scripted
//	tiers:
//	  cheap: [ollama:llama3.2, scripted:scripted-small]
//	  rich:  [anthropic:claude-sonnet-4-5, scripted:scripted-large]
//	purposes: {ambience: cheap, npc_dialogue: cheap, quest_seed: rich}
//	retry: {max_attempts: 3, base_delay: 250ms, max_delay: 8s, max_retry_after: 30s}
//	timeout: 60s
//	prices_file: /etc/worldgate/prices.yaml   # optional override of the embedded table
type File struct {
	Providers  []ProviderConfig `yaml:"providers"`
	llm.Config `yaml:",inline"`
	PricesFile string `yaml:"prices_file"`
}

// ProviderConfig describes one provider instance.
type ProviderConfig struct {
	Name    string `yaml:"name"`
	Type    string `yaml:"type"`
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the key; keys are
	// never written in the file.
	APIKeyEnv      string            `yaml:"api_key_env"`
	Headers        map[string]string `yaml:"headers"`
	Capabilities   *llm.Capabilities `yaml:"capabilities"`
	MaxTokensField string            `yaml:"max_tokens_field"`
	Timeout        time.Duration     `yaml:"timeout"`
}

// Options are process-level dependencies.
type Options struct {
	// Registerer receives the worldgate_ai_* metrics (nil: none).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Getenv resolves api_key_env (default os.Getenv).
	Getenv func(string) string
	// Admitter, when set, reserves budget before every call (the ai-worker's budget ledger).
	Admitter llm.Admitter
}

// Tier names of the default configuration.
const (
	TierCheap = "cheap"
	TierRich  = "rich"
)

// DefaultConfig routes everything to the offline scripted provider:
// cheap → scripted:scripted-small, rich → scripted:scripted-large. It is the one place that
// gives each agent role's purpose its tier: ambience and npc_dialogue are cheap, quest_seed is
// rich; a configuration file without purposes keeps these.
func DefaultConfig() llm.Config {
	return llm.Config{
		Tiers: map[string][]string{
			TierCheap: {"scripted:" + scripted.ModelSmall},
			TierRich:  {"scripted:" + scripted.ModelLarge},
		},
		Purposes: map[llm.Purpose]string{
			roles.PurposeAmbience:    TierCheap,
			roles.PurposeNPCDialogue: TierCheap,
			roles.PurposeQuestSeed:   TierRich,
		},
		DefaultTier: TierCheap,
		Degrade:     map[string]string{TierRich: TierCheap},
	}
}

// Default is the embedded default: the scripted provider serving tiers
// cheap (scripted-small) and rich (scripted-large). No network.
func Default(o Options) (*llm.Registry, error) {
	return llm.NewRegistry(DefaultConfig(), registryOptions(o, llm.DefaultPrices(), scripted.New(scripted.Options{}))...)
}

// Parse reads a File from YAML; unknown fields are errors.
func Parse(data []byte) (File, error) {
	var f File
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("llm setup: configuration is not valid: %w", err)
	}
	return f, nil
}

// Load reads and builds the configuration in the file at path.
func Load(path string, o Options) (*llm.Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llm setup: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return Build(f, o)
}

// Build creates the providers and the registry. With no providers listed it
// adds the scripted provider; with no tiers, the default scripted tiers.
func Build(f File, o Options) (*llm.Registry, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	prices := llm.DefaultPrices()
	if f.PricesFile != "" {
		var err error
		if prices, err = llm.LoadPrices(f.PricesFile); err != nil {
			return nil, err
		}
	}
	cfg := f.Config
	def := DefaultConfig()
	if len(cfg.Tiers) == 0 {
		cfg.Tiers = def.Tiers
	}
	if len(cfg.Purposes) == 0 {
		// The agent roles' purposes keep their default tiers where the file has those tiers.
		cfg.Purposes = map[llm.Purpose]string{}
		for p, tier := range def.Purposes {
			if _, ok := cfg.Tiers[tier]; ok {
				cfg.Purposes[p] = tier
			}
		}
	}
	if cfg.DefaultTier == "" {
		cfg.DefaultTier = def.DefaultTier
	}
	if cfg.Degrade == nil {
		_, rich := cfg.Tiers[TierRich]
		_, cheap := cfg.Tiers[TierCheap]
		if rich && cheap {
			cfg.Degrade = def.Degrade
		}
	}
	if len(f.Providers) == 0 {
		f.Providers = []ProviderConfig{{Name: "scripted", Type: "scripted"}}
	}
	var ps []llm.Provider
	for _, pc := range f.Providers {
		key := ""
		if pc.APIKeyEnv != "" {
			key = getenv(pc.APIKeyEnv)
			if key == "" {
				return nil, fmt.Errorf("llm setup: provider %q reads its API key from $%s, which is empty", pc.Name, pc.APIKeyEnv)
			}
		}
		var (
			p   llm.Provider
			err error
		)
		switch pc.Type {
		case "openai", "openai-compatible":
			p, err = openai.New(openai.Config{Name: pc.Name, BaseURL: pc.BaseURL, APIKey: key, Headers: pc.Headers,
				Capabilities: pc.Capabilities, MaxTokensField: pc.MaxTokensField})
		case "anthropic":
			p, err = anthropic.New(anthropic.Config{Name: pc.Name, BaseURL: pc.BaseURL, APIKey: key, Headers: pc.Headers,
				Capabilities: pc.Capabilities})
		case "scripted", "":
			p = scripted.New(scripted.Options{Name: pc.Name})
		default:
			return nil, fmt.Errorf("llm setup: provider %q has type %q; use openai, anthropic or scripted", pc.Name, pc.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("llm setup: provider %q: %w", pc.Name, err)
		}
		if pc.Timeout > 0 {
			if cfg.ProviderTimeouts == nil {
				cfg.ProviderTimeouts = map[string]time.Duration{}
			}
			cfg.ProviderTimeouts[p.Name()] = pc.Timeout
		}
		ps = append(ps, p)
	}
	return llm.NewRegistry(cfg, registryOptions(o, prices, ps...)...)
}

func registryOptions(o Options, prices *llm.PriceTable, ps ...llm.Provider) []llm.Option {
	opts := []llm.Option{llm.WithProviders(ps...), llm.WithPrices(prices)}
	if o.Registerer != nil {
		opts = append(opts, llm.WithMetrics(o.Registerer))
	}
	if o.Logger != nil {
		opts = append(opts, llm.WithLogger(o.Logger))
	}
	if o.Admitter != nil {
		opts = append(opts, llm.WithAdmitter(o.Admitter))
	}
	return opts
}
