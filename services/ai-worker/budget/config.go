// Package budget caps what the ai-worker spends on LLM calls before the calls are made.
//
// Budgets (global, per purpose, per actor, per location or region, per provider/model; in
// USD and tokens; per minute, hour, day or month) come from a file (docs/budgets.md). A
// Ledger is the llm.Admitter of the provider layer: before each call it reserves the call's
// estimate (prompt estimate plus the template's completion cap, at the target's price) in
// every budget the call falls under, in NATS KV with compare-and-set, so every replica
// draws on the same windows and together they never exceed a budget by more than one
// call's estimate; after the call it settles the reservation with the actual cost, or
// releases it when the call failed. A refused reservation makes the provider layer try the
// next target, then a cheaper tier; the agent proposes static fallback content when none
// is left, so the game keeps getting content.
//
// Operators change budgets at runtime (worldgate budget: set, raise, pause, resume); every
// replica watches the control keys and obeys within a second. The budget arithmetic is pure
// functions (arith.go); KV access sits in ledger.go and control.go.
package budget

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Scope says which calls a budget covers.
type Scope string

// Scopes.
const (
	ScopeGlobal   Scope = "global"   // every call
	ScopePurpose  Scope = "purpose"  // calls of one purpose (match: the purpose)
	ScopeModel    Scope = "model"    // calls on one target (match: provider:model, or provider:*)
	ScopeActor    Scope = "actor"    // each actor (player) separately; match: one actor, or empty for every actor
	ScopeLocation Scope = "location" // each location separately; match: one location, or empty
	ScopeRegion   Scope = "region"   // each region separately; match: one region, or empty
)

// PerSubject reports whether the scope keeps one window per actor, location or region.
func (s Scope) PerSubject() bool { return s == ScopeActor || s == ScopeLocation || s == ScopeRegion }

// Budget is one configured budget.
type Budget struct {
	Name   string `yaml:"name" json:"name"`
	Scope  Scope  `yaml:"scope" json:"scope"`
	Match  string `yaml:"match,omitempty" json:"match,omitempty"`
	Window Window `yaml:"window" json:"window"`
	// USD and Tokens are the limits per window; 0 means no limit of that kind (one of them
	// must be set).
	USD    float64 `yaml:"usd,omitempty" json:"usd,omitempty"`
	Tokens int64   `yaml:"tokens,omitempty" json:"tokens,omitempty"`
	// DegradeAt (0 < x ≤ 1, default 1): once a call would take the window above this share
	// of its limit, calls that a cheaper tier could serve are refused here (and so move to
	// the cheaper tier); the cheapest tier may use the budget up to its limit.
	DegradeAt float64 `yaml:"degrade_at,omitempty" json:"degradeAt,omitempty"`
}

// Limit is the budget's limit in ledger units.
func (b Budget) Limit() Limit { return Limit{Micros: Micros(b.USD), Tokens: b.Tokens} }

// Config is a budget file.
type Config struct {
	Budgets []Budget `yaml:"budgets" json:"budgets"`
}

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ParseConfig reads a budget file. An error names the line and the field that is wrong.
func ParseConfig(data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("budget file is not valid YAML: %w", err)
	}
	c := &Config{}
	if len(root.Content) == 0 {
		return c, nil
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: a budget file is a mapping with one key, budgets", doc.Line)
	}
	var list *yaml.Node
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k := doc.Content[i]
		if k.Value != "budgets" {
			return nil, fmt.Errorf("line %d: field %s: unknown; a budget file has one key, budgets", k.Line, k.Value)
		}
		list = doc.Content[i+1]
	}
	if list == nil || list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
		return c, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: field budgets: must be a list of budgets", list.Line)
	}
	seen := map[string]int{}
	for _, item := range list.Content {
		if item.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("line %d: each budget is a mapping (name, scope, window, usd and/or tokens)", item.Line)
		}
		var b Budget
		// Strict decoding of one item: an unknown or mistyped field is named with its line.
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		if err := enc.Encode(item); err != nil {
			return nil, fmt.Errorf("line %d: %w", item.Line, err)
		}
		dec := yaml.NewDecoder(&buf)
		dec.KnownFields(true)
		if err := dec.Decode(&b); err != nil {
			return nil, fmt.Errorf("line %d: %s", item.Line+errLineOffset(err), errText(err))
		}
		field := func(name string) int {
			for i := 0; i+1 < len(item.Content); i += 2 {
				if item.Content[i].Value == name {
					return item.Content[i].Line
				}
			}
			return item.Line
		}
		bad := func(f, format string, a ...any) error {
			who := ""
			if b.Name != "" {
				who = fmt.Sprintf("budget %q: ", b.Name)
			}
			return fmt.Errorf("line %d: %sfield %s: %s", field(f), who, f, fmt.Sprintf(format, a...))
		}
		switch {
		case !validName.MatchString(b.Name):
			return nil, bad("name", "%q must be 1-63 lower-case letters, digits, - or _ (it names KV keys and metric labels)", b.Name)
		case seen[b.Name] > 0:
			return nil, bad("name", "%q is already used by the budget on line %d", b.Name, seen[b.Name])
		}
		seen[b.Name] = field("name")
		switch b.Scope {
		case ScopeGlobal:
			if b.Match != "" {
				return nil, bad("match", "a global budget covers every call; remove match")
			}
		case ScopePurpose:
			if b.Match == "" {
				return nil, bad("match", "a purpose budget names its purpose (e.g. quest_seed)")
			}
		case ScopeModel:
			if p, m, ok := strings.Cut(b.Match, ":"); !ok || p == "" || m == "" {
				return nil, bad("match", "%q: a model budget names provider:model or provider:*", b.Match)
			}
		case ScopeActor, ScopeLocation, ScopeRegion:
		default:
			return nil, bad("scope", "%q is not one of global, purpose, model, actor, location, region", b.Scope)
		}
		if _, ok := windows[b.Window]; !ok {
			return nil, bad("window", "%q is not one of minute, hour, day, month", b.Window)
		}
		switch {
		case b.USD < 0:
			return nil, bad("usd", "%v is negative", b.USD)
		case b.Tokens < 0:
			return nil, bad("tokens", "%d is negative", b.Tokens)
		case b.USD == 0 && b.Tokens == 0:
			return nil, bad("usd", "set usd, tokens or both: a budget without a limit limits nothing")
		case b.DegradeAt < 0 || b.DegradeAt > 1:
			return nil, bad("degrade_at", "%v must be a share between 0 and 1", b.DegradeAt)
		}
		c.Budgets = append(c.Budgets, b)
	}
	return c, nil
}

// errLineOffset: yaml.v3 counts lines of the re-encoded item from 1.
func errLineOffset(err error) int {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		var n int
		if _, e := fmt.Sscanf(te.Errors[0], "line %d:", &n); e == nil {
			return n - 1
		}
	}
	return 0
}

func errText(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg := te.Errors[0]
		if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "line ") {
			msg = msg[i+2:]
		}
		if strings.HasPrefix(msg, "field ") && strings.Contains(msg, " not found in type ") {
			f := strings.TrimPrefix(msg[:strings.Index(msg, " not found in type ")], "field ")
			return "field " + f + ": unknown (fields: name, scope, match, window, usd, tokens, degrade_at)"
		}
		return msg
	}
	return err.Error()
}

// LoadConfig reads and checks a budget file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read budget file: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("budget file %s: %w", path, err)
	}
	return c, nil
}
