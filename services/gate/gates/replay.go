package gates

import (
	"context"
	"errors"
	"fmt"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/provenance"
)

// replay checks that the proposal records everything needed to regenerate it: provider and
// model, a known prompt template version with its SHA-256, every tool result with its hash, a
// context hash that recomputes from them (provenance.ContextHash, purpose = kind), and token
// counts. Temperature and seed are recorded by construction (zero is a valid value of both).
type replay struct {
	templates TemplateLookup
}

// Replay is the replay gate's name.
const Replay = events.GateReplay

// replayGate declares the replay gate (see Spec).
var replayGate = Spec{
	Name: Replay, New: newReplay,
	Summary: "provenance complete: the template is known and the context hash recomputes",
	Needs:   []Need{NeedTemplates},
}

func newReplay(_ context.Context, d Deps) (Gate, error) {
	if d.Templates == nil {
		return nil, errors.New("the replay gate needs a prompt template lookup")
	}
	return &replay{templates: d.Templates}, nil
}

func (*replay) Name() string { return Replay }

func (g *replay) Check(_ context.Context, p *events.Proposal) (Decision, error) {
	if narrated(p) {
		return Reject(events.CodeRouteInvalid,
			"A narrator's proposal was routed to the replay gate: a person or an outside agent wrote it, there is nothing to regenerate, so its route leaves replay out.",
			map[string]any{"emitter": events.EmitterNarrator}), nil
	}
	missing := replayProblems(p, g.templates)
	if len(missing) == 0 {
		return Pass(), nil
	}
	return Reject(events.CodeReplayIncomplete,
		fmt.Sprintf("The proposal cannot be regenerated: %s.", listOf(missing)),
		map[string]any{"missing": missing}), nil
}

// replayProblems is the pure rule: what is missing or does not add up.
func replayProblems(p *events.Proposal, templates TemplateLookup) []string {
	pv := p.Provenance
	if pv == nil {
		return []string{"provenance is missing"}
	}
	var out []string
	if pv.Provider == "" {
		out = append(out, "provenance.provider is empty")
	}
	if pv.Model == "" {
		out = append(out, "provenance.model is empty")
	}
	templateSHA := ""
	switch t := pv.PromptTemplate; {
	case t == nil:
		out = append(out, "provenance.promptTemplate is missing")
	case t.ID == "" || t.Version == "" || t.SHA256 == "":
		out = append(out, "provenance.promptTemplate needs id, version and sha256")
	default:
		known, ok := templates.Lookup(t.ID, t.Version)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("prompt template %s@%s is not in the template registry", t.ID, t.Version))
		case known != t.SHA256:
			out = append(out, fmt.Sprintf("prompt template %s@%s has sha256 %s in the registry, not %s", t.ID, t.Version, known, t.SHA256))
		default:
			templateSHA = t.SHA256
		}
	}
	toolsOK := true
	for i, c := range pv.ToolCalls {
		switch {
		case len(c.Result) == 0 && c.Error == "":
			out = append(out, fmt.Sprintf("tool call %d (%s) has no recorded result", i+1, c.Tool))
			toolsOK = false
		case len(c.Result) > 0:
			h, err := provenance.ResultHash(c.Result)
			if err != nil || h != c.ResultHash {
				out = append(out, fmt.Sprintf("tool call %d (%s) result does not match its resultHash", i+1, c.Tool))
				toolsOK = false
			}
		}
	}
	switch {
	case pv.ContextHash == "":
		out = append(out, "provenance.contextHash is missing")
	case templateSHA != "" && toolsOK && pv.Model != "":
		h, err := provenance.ContextHash(p.Kind, templateSHA, provenance.ToolResults(pv.ToolCalls), pv.Model)
		if err != nil || h != pv.ContextHash {
			out = append(out, "provenance.contextHash does not recompute from the recorded tool results, template and model")
		}
	}
	// Tokens are owed by content a model wrote: not by a cache hit (the original call paid
	// them) nor by fallback content that no model call preceded.
	if !pv.CacheHit && pv.Fallback == "" && pv.Tokens.Prompt+pv.Tokens.Completion == 0 {
		out = append(out, "provenance.tokens are not recorded")
	}
	return out
}

// narrated reports whether the narrator emitter proposed p: the schema gate's hop says so (it
// read the emitter from the subject), or the proposal's provenance does.
func narrated(p *events.Proposal) bool {
	for _, h := range p.Route.Trail {
		if h.Gate == Schema && h.Emitter != "" {
			return h.Emitter == events.EmitterNarrator
		}
	}
	return p.AgentRole == events.EmitterNarrator || (p.Provenance != nil && p.Provenance.Narrator != nil)
}
