package replay

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/textstats"
)

// Variant is what a shadow run changes.
type Variant struct {
	// Templates replace the recorded template version, by template id (roles whose template is
	// not named keep the version they recorded).
	Templates map[string]templates.Spec
	// Model pins "provider:model" (empty: the model each proposal recorded).
	Model string
}

func (v Variant) String() string {
	var parts []string
	for _, id := range sortedKeys(v.Templates) {
		parts = append(parts, "template "+id+"@"+v.Templates[id].Version)
	}
	if v.Model != "" {
		parts = append(parts, "model "+v.Model)
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Judge runs the gate checks on a proposal without publishing anything (gates.DryRun on
// gates.DryRunGates).
type Judge func(ctx context.Context, p *events.Proposal) []gates.Verdict

// Side is one side of a comparison: a recorded proposal or its shadow.
type Side struct {
	ProposalID string          `json:"proposalId"`
	Template   string          `json:"template"`
	Model      string          `json:"model"`
	Fallback   string          `json:"fallback,omitempty"`
	Gates      []gates.Verdict `json:"gates"`
	Tokens     events.Tokens   `json:"tokens"`
	CostUSD    float64         `json:"costUsd"`
	Text       string          `json:"text"`
}

// Pair is one trigger's recorded first proposal beside its shadow.
type Pair struct {
	Trigger   string `json:"trigger"`
	Kind      string `json:"kind"`
	AgentRole string `json:"agentRole"`
	Recorded  Side   `json:"recorded"`
	Shadow    *Side  `json:"shadow,omitempty"`
	// LiveTools are the tools the shadow called live because the recording lacked them.
	LiveTools []string `json:"liveTools,omitempty"`
	// Skipped says why the trigger was not rerun.
	Skipped string `json:"skipped,omitempty"`
}

// Shadow regenerates rec's proposal (a first attempt) with v, over its recorded tool results
// (tools the recording lacks are called live: they are read-only), and judges it with judge.
// recorded are the gate verdicts the recorded proposal got. The shadow proposal has an id of
// its own (ShadowID) and is never published.
func (r *Replayer) Shadow(ctx context.Context, rec Recording, recorded []gates.Verdict, v Variant, judge Judge) Pair {
	p := rec.Proposal
	pair := Pair{Trigger: p.CausationID, Kind: p.Kind, AgentRole: p.AgentRole, Recorded: side(p, recorded)}
	skip := func(err error) Pair {
		pair.Skipped = err.Error()
		return pair
	}
	role, err := aiRole(p)
	if err != nil {
		return skip(err)
	}
	if p.Provenance == nil {
		return skip(incomplete(p, "the proposal has no provenance"))
	}
	if rail := p.Provenance.InputRail; rail != nil && len(rail.Blocked) > 0 {
		return skip(fmt.Errorf("the input rail blocked the player's words (%s): no model is called, whatever the template or model", strings.Join(rail.Blocked, ", ")))
	}
	g, err := generation(rec, role)
	if err != nil {
		return skip(err)
	}
	if spec, ok := v.Templates[role.Template]; ok {
		g.Template = &spec
	} else if t := p.Provenance.PromptTemplate; t != nil && p.Provenance.Fallback == "" {
		spec, ok := templates.Version(t.ID, t.Version)
		if !ok {
			return skip(&Error{Problem: ProblemTemplateGone, ProposalID: p.ProposalID, Message: fmt.Sprintf("prompt template %s@%s is not registered any more", t.ID, t.Version)})
		}
		g.Template = &spec
	}
	g.Model = v.Model
	if g.Model == "" && p.Provenance.Fallback == "" {
		g.Model = p.Provenance.Provider + ":" + p.Provenance.Model
	}
	res, uses, err := r.run(ctx, p, g, true)
	if err != nil {
		return skip(err)
	}
	np := res.Proposal
	np.ProposalID = ShadowID(p.ProposalID, v)
	s := side(np, judge(ctx, np))
	pair.Shadow = &s
	for _, u := range uses {
		if u.Source == SourceLive && !slices.Contains(pair.LiveTools, u.Tool) {
			pair.LiveTools = append(pair.LiveTools, u.Tool)
		}
	}
	return pair
}

var shadowNamespace = uuid.MustParse("6f1c9a52-3d7e-5b08-a4c1-9e2f7d6b0a13")

// ShadowID is the id of proposal id's shadow under v: its own, so that the gates do not take it
// for a redelivery of the recorded proposal.
func ShadowID(id string, v Variant) string {
	return uuid.NewSHA1(shadowNamespace, []byte(id+"/"+v.String())).String()
}

func side(p *events.Proposal, verdicts []gates.Verdict) Side {
	s := Side{ProposalID: p.ProposalID, Gates: verdicts}
	if pv := p.Provenance; pv != nil {
		s.Model, s.Fallback, s.Tokens, s.CostUSD = pv.Provider+":"+pv.Model, pv.Fallback, pv.Tokens, pv.CostUSD
		if t := pv.PromptTemplate; t != nil {
			s.Template = t.ID + "@" + t.Version
		}
	}
	if payload, err := events.DecodePayload(p.Kind, p.Payload); err == nil {
		s.Text = payload.Content()
	}
	return s
}

// Summary is one side's totals over a shadow run.
type Summary struct {
	Proposals int `json:"proposals"`
	// Gates counts outcomes per gate: gate → outcome → proposals.
	Gates map[string]map[string]int `json:"gates"`
	// Rejections counts rejection codes.
	Rejections map[string]int `json:"rejections"`
	// Committable: passed every gate that ran.
	Committable int     `json:"committable"`
	Fallbacks   int     `json:"fallbacks"`
	Tokens      int     `json:"tokens"`
	CostUSD     float64 `json:"costUsd"`
	// MeanLength is the mean text length in characters; Distinct1/2 are distinct-n over all
	// texts (textstats.DistinctN: distinct word n-grams / all n-grams; 1 = nothing repeats).
	MeanLength float64 `json:"meanLength"`
	Distinct1  float64 `json:"distinct1"`
	Distinct2  float64 `json:"distinct2"`
}

// Summarize totals the recorded side and the shadow side of the pairs that were rerun.
func Summarize(pairs []Pair) (recorded, shadow Summary) {
	var rs, ss []Side
	for _, p := range pairs {
		if p.Shadow == nil {
			continue
		}
		rs, ss = append(rs, p.Recorded), append(ss, *p.Shadow)
	}
	return summarize(rs), summarize(ss)
}

func summarize(sides []Side) Summary {
	s := Summary{Proposals: len(sides), Gates: map[string]map[string]int{}, Rejections: map[string]int{}}
	var texts []string
	length := 0
	for _, x := range sides {
		ok := true
		for _, v := range x.Gates {
			if s.Gates[v.Gate] == nil {
				s.Gates[v.Gate] = map[string]int{}
			}
			s.Gates[v.Gate][v.Outcome]++
			if v.Outcome != events.OutcomePassed && v.Outcome != gates.OutcomeSkipped {
				ok = false
			}
			if v.Code != "" {
				s.Rejections[v.Code]++
			}
		}
		if ok {
			s.Committable++
		}
		if x.Fallback != "" {
			s.Fallbacks++
		}
		s.Tokens += x.Tokens.Prompt + x.Tokens.Completion
		s.CostUSD += x.CostUSD
		length += len([]rune(x.Text))
		texts = append(texts, x.Text)
	}
	if len(sides) > 0 {
		s.MeanLength = float64(length) / float64(len(sides))
	}
	s.Distinct1, s.Distinct2 = textstats.DistinctN(texts, 1), textstats.DistinctN(texts, 2)
	return s
}
