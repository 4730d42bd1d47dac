package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/shared/llm/prompt"
)

// The input rail: the player's words (a role's untrusted input) are moderated through
// mcp-classify's moderate-content before any model reads them. A blocked category means no
// model call: the NPC answers with fallback content, and the refusal is counted, logged and
// recorded in provenance.inputRail (which worldgate trace shows). Personal data is replaced
// by placeholders in what the model sees and in what the agent stores (the trigger it keeps
// for reprompts), and the redaction is recorded. Injection phrasings are flagged and stay in
// their data block: the prompt never treats them as instructions.

// ModerateTool is the mcp-classify tool the input rail asks.
const ModerateTool = "moderate-content"

// CauseInputBlocked and CauseInputRailUnavailable are fallback causes of the input rail.
const (
	CauseInputBlocked         = "input_blocked"
	CauseInputRailUnavailable = "input_rail_unavailable"
)

// DefaultRailBlocked are the categories that block the model call by default. Personal data is
// redacted instead, and injection phrasings are flagged and kept as data.
var DefaultRailBlocked = []string{"harassment", "threat", "hate", "sexual", "self_harm", "violence_extreme", "markup_injection"}

// railCategories bounds the category label of the rail metric.
var railCategories = []string{"harassment", "threat", "hate", "sexual", "self_harm", "violence_extreme", "markup_injection", "pii", "prompt_injection"}

// RailConfig configures the input rail.
type RailConfig struct {
	// Disabled turns the rail off: the player's words reach the model unchecked.
	Disabled bool
	// Blocked are the categories that block the model call (default DefaultRailBlocked).
	Blocked []string
	// OnFlag, when set, is told each time a player's words are flagged for a blocked category
	// or for prompt injection (repeat offenders). It must not block for long.
	OnFlag func(ctx context.Context, playerID string, categories []string)
}

// railVerdict is moderate-content's structured output, as far as the rail reads it.
type railVerdict struct {
	Flagged       bool     `json:"flagged"`
	Categories    []string `json:"categories"`
	PolicyVersion string   `json:"policyVersion"`
	PersonalData  []struct {
		Kind string `json:"kind"`
	} `json:"personalData"`
	Redacted string `json:"redacted"`
}

// inputRail moderates in.Untrusted. It returns the result to answer with when the input is
// blocked (or cannot be checked), else nil and the trigger as it may be stored (personal data
// redacted), with in.Untrusted redacted and in.Rail set.
func (a *Agent) inputRail(ctx context.Context, role roles.Role, env *events.Envelope, in *roles.Input) (*Result, *events.Envelope, error) {
	if a.cfg.Rail.Disabled || len(in.Untrusted) == 0 {
		return nil, env, nil
	}
	blockedCats := a.cfg.Rail.Blocked
	if len(blockedCats) == 0 {
		blockedCats = DefaultRailBlocked
	}
	rail := &events.InputRail{}
	replace := map[string]string{}
	var blocked []string
	for i, u := range in.Untrusted {
		res, err := a.cfg.Tools.Call(ctx, ModerateTool, map[string]any{"text": u.Value})
		var v railVerdict
		if err == nil {
			err = res.Decode(&v)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			a.m.rail.WithLabelValues(role.Name, "unavailable", "none").Inc()
			t := &task{role: role, env: env, in: *in}
			r, ferr := a.fallback(ctx, t, CauseInputRailUnavailable,
				"input rail: the player's words could not be moderated ("+err.Error()+"), so no model read them")
			return r, nil, ferr
		}
		rail.PolicyVersion = v.PolicyVersion
		for _, c := range v.Categories {
			if !slices.Contains(rail.Flagged, c) {
				rail.Flagged = append(rail.Flagged, c)
			}
			if slices.Contains(blockedCats, c) && !slices.Contains(blocked, c) {
				blocked = append(blocked, c)
			}
		}
		if v.Redacted != "" && len(v.PersonalData) > 0 {
			counts := map[string]int{}
			for _, p := range v.PersonalData {
				counts[p.Kind]++
			}
			kinds := make([]string, 0, len(counts))
			for k := range counts {
				kinds = append(kinds, k)
			}
			sort.Strings(kinds)
			for _, k := range kinds {
				rail.Redactions = append(rail.Redactions, events.Redaction{Field: u.Label, Kind: k, Count: counts[k]})
			}
			replace[u.Value] = v.Redacted
			in.Untrusted[i] = prompt.Data(u.Label, v.Redacted)
			if _, ok := in.Bind[roles.BindPlayerSaid]; ok && u.Label == roles.LabelPlayerSaid {
				in.Bind[roles.BindPlayerSaid] = v.Redacted // what is proposed and stored is redacted too
			}
		}
	}
	sort.Strings(rail.Flagged)
	sort.Strings(blocked)
	rail.Blocked = blocked
	in.Rail = rail
	stored := env
	if len(replace) > 0 {
		var err error
		if stored, err = redactEnvelope(env, replace); err != nil {
			return nil, nil, err
		}
	}
	log := a.logger(ctx).With("correlationId", env.CorrelationID, "role", role.Name, "policyVersion", rail.PolicyVersion)
	for _, c := range rail.Flagged {
		outcome := "flagged"
		if slices.Contains(blocked, c) {
			outcome = "blocked"
		}
		if !slices.Contains(railCategories, c) {
			c = "other"
		}
		a.m.rail.WithLabelValues(role.Name, outcome, c).Inc()
	}
	if len(rail.Redactions) > 0 {
		a.m.rail.WithLabelValues(role.Name, "redacted", "pii").Inc()
	}
	if len(rail.Flagged) == 0 && len(rail.Redactions) == 0 {
		a.m.rail.WithLabelValues(role.Name, "passed", "none").Inc()
	}
	if offences := offending(rail.Flagged, blocked); len(offences) > 0 && a.cfg.Rail.OnFlag != nil {
		a.cfg.Rail.OnFlag(ctx, playerOf(in, env), offences)
	}
	if len(blocked) == 0 {
		if len(rail.Flagged) > 0 || len(rail.Redactions) > 0 {
			log.Info("Prompt.InputRail", "flagged", rail.Flagged, "redactions", len(rail.Redactions))
		}
		return nil, stored, nil
	}
	log.Warn("Prompt.InputRail", "blocked", blocked, "flagged", rail.Flagged)
	// Blocked words are neither answered nor remembered: the fallback line carries none of them.
	delete(in.Bind, roles.BindPlayerSaid)
	t := &task{role: role, env: stored, in: *in}
	r, err := a.fallback(ctx, t, CauseInputBlocked, fmt.Sprintf(
		"input rail: the player's words were flagged for %s under moderation policy %s; no model was called",
		strings.Join(blocked, ", "), rail.PolicyVersion))
	return r, nil, err
}

// offending are the flags that count against a player: blocked categories and injection.
func offending(flagged, blocked []string) []string {
	var out []string
	for _, c := range flagged {
		if slices.Contains(blocked, c) || c == "prompt_injection" {
			out = append(out, c)
		}
	}
	return out
}

// playerOf is the player the input came from: the bound playerId, else the envelope's actor.
func playerOf(in *roles.Input, env *events.Envelope) string {
	if p := in.Bind["playerId"]; p != "" {
		return p
	}
	return env.Actor.ID
}

// redactEnvelope returns a copy of env whose payload strings are replaced as given (the
// player's words with their personal data redacted), for what the agent stores.
func redactEnvelope(env *events.Envelope, replace map[string]string) (*events.Envelope, error) {
	var payload map[string]any
	if err := json.Unmarshal(env.Payload, &payload); err != nil {
		return nil, fmt.Errorf("redact the trigger: %w", err)
	}
	for k, v := range payload {
		if s, ok := v.(string); ok {
			if r, ok := replace[s]; ok {
				payload[k] = r
			}
		}
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	c := *env
	c.Payload = raw
	return &c, nil
}

// withRail records the input rail in provenance (every proposal of a task, fallback included).
func withRail(prov *events.Provenance, rail *events.InputRail) *events.Provenance {
	if prov != nil && rail != nil {
		prov.InputRail = rail
	}
	return prov
}

// cachedRail is the input rail record kept with the trigger for reprompts (nil when the trigger
// had no untrusted input or the record expired).
func (a *Agent) cachedRail(ctx context.Context, role, eventID string) (*events.InputRail, error) {
	raw, err := a.cfg.Cache.Get(ctx, railKey(role, eventID))
	if errors.Is(err, ErrMiss) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up the input rail of %s: %w", eventID, err)
	}
	var r events.InputRail
	if json.Unmarshal(raw, &r) != nil {
		return nil, nil // unreadable: the reprompt's provenance goes without it
	}
	return &r, nil
}
