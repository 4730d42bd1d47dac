package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/ai-worker/agent"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/worldgate/replay"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

func init() {
	commands["shadow"] = command{"shadow -from T [-to T] | -ids FILE, -template ID@VERSION[=FILE] or -model P:M: rerun recorded triggers with another template or model, gates dry-run, side by side", runShadow}
}

// ShadowReport is a shadow run: each trigger's recorded first proposal beside its shadow, and
// both sides' totals.
type ShadowReport struct {
	Variant  string         `json:"variant"`
	From     *time.Time     `json:"from,omitempty"`
	To       *time.Time     `json:"to,omitempty"`
	Recorded replay.Summary `json:"recorded"`
	Shadow   replay.Summary `json:"shadow"`
	// LiveTools counts, per tool, the shadow's calls the recording lacked (called live).
	LiveTools map[string]int `json:"liveTools"`
	Skipped   int            `json:"skipped"`
	Pairs     []replay.Pair  `json:"pairs"`
}

func runShadow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("shadow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `Usage: worldgate shadow (-from T [-to T] | -ids FILE) (-template ID@VERSION[=FILE] ... | -model PROVIDER:MODEL)

Reruns recorded traffic with a different template version or model: the triggers of a time
range (the AI roles' world events on WORLD), or the proposals named in a file, each
regenerated from its trigger over the tool results its first proposal recorded (a tool call the
recording lacks is made live: the MCP tools are read-only, and the report counts them). Every
new proposal goes through its route's gate checks in this process, on read-only state: KV
reads see the live buckets (less the fingerprints of the proposals being replaced; rate
windows start empty), the graph is read, moderation is asked; nothing is published, held,
audited or committed. Prints, recorded beside shadow: outcomes per gate, rejection codes,
fallbacks, tokens and cost, text length and distinct-1/2.`)
		fs.PrintDefaults()
	}
	var f regenFlags
	f.register(fs)
	graph := graphx.Settings{URL: "ws://127.0.0.1:8182/gremlin", Username: "reader", ReadOnly: true}
	graph.RegisterFlags(fs, "graph-")
	from := fs.String("from", "", "first trigger time: RFC 3339, or a duration ago (2h)")
	to := fs.String("to", "", "last trigger time (default now): RFC 3339, or a duration ago")
	idsFile := fs.String("ids", "", "file of proposal ids (one a line, # comments): rerun the triggers of these instead of a time range")
	var tmpls []string
	fs.Func("template", "template version to try: ID@VERSION (registered) or ID@VERSION=FILE (a draft's text); repeatable, one per template id", func(s string) error {
		tmpls = append(tmpls, s)
		return nil
	})
	model := fs.String("model", "", "model to try, provider:model (a target of -llm-config); default: each proposal's recorded model")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	variant, drafts, err := shadowVariant(tmpls, *model)
	if err != nil {
		return err
	}
	if (*from == "") == (*idsFile == "") {
		return errors.New("give either -from (a time range) or -ids FILE")
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	nc, js, err := natsx.Connect(f.nats.as("worldgate-shadow"), logx.Discard())
	if err != nil {
		return err
	}
	defer nc.Close()
	rep := &ShadowReport{Variant: variant.String(), LiveTools: map[string]int{}}
	var recs []shadowRecording
	if *idsFile != "" {
		recs, err = recordingsOf(ctx, js, *idsFile, time.Now().Add(-f.since))
	} else {
		var start, end time.Time
		if start, err = parseWhen(*from, time.Now()); err != nil {
			return fmt.Errorf("-from: %w", err)
		}
		end = time.Now()
		if *to != "" {
			if end, err = parseWhen(*to, end); err != nil {
				return fmt.Errorf("-to: %w", err)
			}
		}
		rep.From, rep.To = &start, &end
		recs, err = triggersBetween(ctx, js, start, end)
	}
	if err != nil {
		return err
	}
	r, tools, err := f.replayer(ctx, js, logx.Discard())
	if err != nil {
		return err
	}
	defer tools.Close()
	g, err := graphx.Open(graph)
	if err != nil {
		return fmt.Errorf("the invariant gate reads the graph: %w", err)
	}
	defer g.Close()
	forget := make([]string, 0, len(recs))
	for _, rc := range recs {
		forget = append(forget, rc.ids...)
	}
	routes := route.Default()
	reg := gates.Builtin()
	gs, err := reg.DryRunGates(ctx, gates.Deps{JetStream: js, Classify: tools, Graph: g, Templates: shadowTemplates(drafts),
		Routes: &routes, Registerer: prometheus.NewRegistry(), Logger: logx.Discard()}, reg.Known(),
		gates.ReadOnlyOptions{Forget: forget, Fresh: []string{natsx.BucketRate}})
	if err != nil {
		return err
	}
	judge := func(ctx context.Context, p *events.Proposal) []gates.Verdict {
		var chain []gates.Gate
		for _, name := range p.Route.Pending {
			if i := slices.IndexFunc(gs, func(g gates.Gate) bool { return g.Name() == name }); i >= 0 {
				chain = append(chain, gs[i])
			}
		}
		return gates.DryRun(ctx, chain, p, events.EmitSubject(p.AgentRole))
	}
	for _, rc := range recs {
		pair := r.Shadow(ctx, rc.Recording, rc.verdicts, variant, judge)
		if pair.Skipped != "" {
			rep.Skipped++
		}
		for _, t := range pair.LiveTools {
			rep.LiveTools[t]++
		}
		rep.Pairs = append(rep.Pairs, pair)
	}
	rep.Recorded, rep.Shadow = replay.Summarize(rep.Pairs)
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return printShadow(stdout, rep)
}

// shadowVariant reads -template and -model.
func shadowVariant(specs []string, model string) (replay.Variant, map[string]templates.Spec, error) {
	v := replay.Variant{Templates: map[string]templates.Spec{}, Model: model}
	drafts := map[string]templates.Spec{}
	for _, s := range specs {
		ref, file, isDraft := strings.Cut(s, "=")
		id, version, ok := strings.Cut(ref, "@")
		if !ok || id == "" || version == "" {
			return v, nil, fmt.Errorf("-template %q: want ID@VERSION or ID@VERSION=FILE", s)
		}
		if _, dup := v.Templates[id]; dup {
			return v, nil, fmt.Errorf("-template: %s is given twice", id)
		}
		var spec templates.Spec
		if isDraft {
			text, err := os.ReadFile(file)
			if err != nil {
				return v, nil, fmt.Errorf("-template %s: %w", ref, err)
			}
			if spec, err = templates.Draft(id, version, string(text)); err != nil {
				return v, nil, fmt.Errorf("-template %s: %w", ref, err)
			}
			drafts[id+"@"+version] = spec
		} else if spec, ok = templates.Version(id, version); !ok {
			return v, nil, fmt.Errorf("-template %s: not registered (worldgate templates lists them; give a draft as %s=FILE)", ref, ref)
		}
		v.Templates[id] = spec
	}
	if len(v.Templates) == 0 && model == "" {
		return v, nil, errors.New("a shadow run changes something: give -template or -model")
	}
	return v, drafts, nil
}

// shadowTemplates is the replay gate's template lookup in a shadow run: the registry and the
// drafts being tried (as they would be once rolled out).
func shadowTemplates(drafts map[string]templates.Spec) gates.TemplateMap {
	m := gates.TemplateMap{}
	for _, i := range templates.List() {
		m[i.ID+"@"+i.Version] = i.SHA256
	}
	for k, s := range drafts {
		m[k] = s.SHA256
	}
	return m
}

// parseWhen reads an RFC 3339 time or a duration before now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration", s)
	}
	return now.Add(-d), nil
}

// shadowRecording is a trigger's first proposal with what the gates said of it, and the ids of
// every proposal made for the trigger (their dedup fingerprints are left out of the shadow's).
type shadowRecording struct {
	replay.Recording
	verdicts []gates.Verdict
	ids      []string
}

// recordingsOf reads the proposal ids in file and finds each one's trigger's first proposal.
func recordingsOf(ctx context.Context, js jetstream.JetStream, file string, since time.Time) ([]shadowRecording, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []shadowRecording
	seen := map[string]bool{}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		id := strings.TrimSpace(sc.Text())
		if id == "" || strings.HasPrefix(id, "#") {
			continue
		}
		corr, err := correlationOf(ctx, js, id, since)
		if err != nil {
			return nil, err
		}
		if corr == "" {
			return nil, fmt.Errorf("%s: no proposal %s on %s since %s", file, id, events.StreamProposals, since.UTC().Format(time.RFC3339))
		}
		world, _, err := scanStream(ctx, js, events.StreamWorld, corr, since)
		if err != nil {
			return nil, err
		}
		props, _, err := scanStream(ctx, js, events.StreamProposals, corr, since)
		if err != nil {
			return nil, err
		}
		for _, rc := range firstProposals(world, props) {
			if rc.Proposal.ProposalID == id || slices.Contains(rc.ids, id) {
				if !seen[rc.Proposal.ProposalID] {
					seen[rc.Proposal.ProposalID] = true
					out = append(out, rc)
				}
			}
		}
	}
	return out, sc.Err()
}

// triggersBetween finds the AI roles' triggers on WORLD between from and to, and their first
// proposals on PROPOSALS.
func triggersBetween(ctx context.Context, js jetstream.JetStream, from, to time.Time) ([]shadowRecording, error) {
	world, err := readStream(ctx, js, events.StreamWorld, from, to)
	if err != nil {
		return nil, err
	}
	props, err := readStream(ctx, js, events.StreamProposals, from, time.Now())
	if err != nil {
		return nil, err
	}
	return firstProposals(world, props), nil
}

// readStream reads stream's messages from from up to to (and no further than its last message
// when the read began).
func readStream(ctx context.Context, js jetstream.JetStream, stream string, from, to time.Time) ([]found, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	si, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	if si.State.Msgs == 0 || si.State.LastTime.Before(from) {
		return nil, nil
	}
	var out []found
	_, err = scanMessages(ctx, s, from, si.State.LastSeq, false, func(seq uint64, m jetstream.Msg) bool {
		meta, _ := m.Metadata()
		if meta != nil && meta.Timestamp.After(to) {
			return true
		}
		at := time.Time{}
		if meta != nil {
			at = meta.Timestamp
		}
		out = append(out, found{stream, m.Subject(), seq, at, m.Headers(), m.Data()})
		return false
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	return out, nil
}

// firstProposals pairs each AI role's trigger in world with its first proposal (attempt 0) in
// props, with the gate verdicts that proposal got.
func firstProposals(world, props []found) []shadowRecording {
	byCause := map[string][]found{}
	for _, m := range props {
		var head struct {
			ProposalID  string           `json:"proposalId"`
			CausationID string           `json:"causationId"`
			Proposal    *events.Proposal `json:"proposal"`
		}
		if json.Unmarshal(m.data, &head) != nil {
			continue
		}
		cause := head.CausationID
		if head.Proposal != nil {
			cause = head.Proposal.CausationID
		}
		byCause[cause] = append(byCause[cause], m)
	}
	var out []shadowRecording
	for _, w := range world {
		env, err := events.DecodeEnvelope(w.data)
		if err != nil {
			continue
		}
		i := slices.IndexFunc(roles.All(), func(r roles.Role) bool { return r.UsesLLM && r.Trigger == env.Type })
		if i < 0 {
			continue
		}
		role := roles.All()[i]
		mine := byCause[env.EventID]
		first := agent.ProposalID(role.Name, env.EventID, 0)
		rec := recordingOf(first, []found{w}, mine)
		if rec == nil {
			continue // the role proposed nothing (ambience still fresh) or it is not recorded
		}
		rc := shadowRecording{Recording: *rec, verdicts: recordedVerdicts(first, mine)}
		for _, m := range mine {
			var p struct {
				ProposalID string `json:"proposalId"`
			}
			if json.Unmarshal(m.data, &p) == nil && p.ProposalID != "" && !slices.Contains(rc.ids, p.ProposalID) {
				rc.ids = append(rc.ids, p.ProposalID)
			}
		}
		out = append(out, rc)
	}
	return out
}

// recordedVerdicts are the gate decisions proposal id got: its fullest routing slip, and the
// refusal it ended with.
func recordedVerdicts(id string, msgs []found) []gates.Verdict {
	var trail []events.Hop
	var refusal *events.Rejection
	for _, m := range msgs {
		if strings.HasPrefix(m.subject, "proposals.rejected.") {
			var r events.Rejection
			if json.Unmarshal(m.data, &r) == nil && r.ProposalID == id {
				refusal = &r
				if r.Proposal != nil && len(r.Proposal.Route.Trail) > len(trail) {
					trail = r.Proposal.Route.Trail
				}
			}
			continue
		}
		var p events.Proposal
		if json.Unmarshal(m.data, &p) == nil && p.ProposalID == id && len(p.Route.Trail) >= len(trail) {
			trail = p.Route.Trail
		}
	}
	var out []gates.Verdict
	for _, h := range trail {
		v := gates.Verdict{Gate: h.Gate, Outcome: h.Outcome, Code: h.Code}
		if i := slices.IndexFunc(out, func(x gates.Verdict) bool { return x.Gate == h.Gate }); i >= 0 {
			out[i] = v // a transient refusal retried: the last decision counts
			continue
		}
		out = append(out, v)
	}
	if refusal != nil && !refusal.Transient && !slices.ContainsFunc(out, func(v gates.Verdict) bool {
		return v.Gate == refusal.Gate && v.Outcome == events.OutcomeRejected
	}) {
		out = append(out, gates.Verdict{Gate: refusal.Gate, Outcome: events.OutcomeRejected, Code: string(refusal.Code), Reason: refusal.Reason})
	}
	return out
}

func printShadow(w io.Writer, r *ShadowReport) error {
	fmt.Fprintf(w, "shadow run: %s; %d triggers rerun, %d skipped\n\n", r.Variant, len(r.Pairs)-r.Skipped, r.Skipped)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	a, b := r.Recorded, r.Shadow
	fmt.Fprintln(tw, "\trecorded\tshadow")
	fmt.Fprintf(tw, "proposals\t%d\t%d\n", a.Proposals, b.Proposals)
	fmt.Fprintf(tw, "passed every gate\t%d\t%d\n", a.Committable, b.Committable)
	fmt.Fprintf(tw, "fallback content\t%d\t%d\n", a.Fallbacks, b.Fallbacks)
	for _, g := range gates.Builtin().Known() {
		if a.Gates[g] == nil && b.Gates[g] == nil {
			continue
		}
		fmt.Fprintf(tw, "gate %s\t%s\t%s\n", g, outcomes(a.Gates[g]), outcomes(b.Gates[g]))
	}
	codes := map[string]bool{}
	for c := range a.Rejections {
		codes[c] = true
	}
	for c := range b.Rejections {
		codes[c] = true
	}
	for _, c := range sortedSet(codes) {
		fmt.Fprintf(tw, "rejected %s\t%d\t%d\n", c, a.Rejections[c], b.Rejections[c])
	}
	fmt.Fprintf(tw, "tokens\t%d\t%d\n", a.Tokens, b.Tokens)
	fmt.Fprintf(tw, "cost USD\t%.6f\t%.6f\n", a.CostUSD, b.CostUSD)
	fmt.Fprintf(tw, "mean text length\t%.1f\t%.1f\n", a.MeanLength, b.MeanLength)
	fmt.Fprintf(tw, "distinct-1\t%.3f\t%.3f\n", a.Distinct1, b.Distinct1)
	fmt.Fprintf(tw, "distinct-2\t%.3f\t%.3f\n", a.Distinct2, b.Distinct2)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.LiveTools) > 0 {
		var parts []string
		for _, t := range sortedSet(r.LiveTools) {
			parts = append(parts, fmt.Sprintf("%s (%d triggers)", t, r.LiveTools[t]))
		}
		fmt.Fprintf(w, "\ncalled live (not in the recording): %s\n", strings.Join(parts, ", "))
	} else {
		fmt.Fprintln(w, "\nevery tool call was answered from the recording")
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tTRIGGER\tRECORDED\tSHADOW\tLENGTH")
	for _, p := range r.Pairs {
		if p.Shadow == nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\tskipped: %s\t\n", p.Kind, p.Trigger, verdictOf(p.Recorded.Gates), p.Skipped)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d → %d\n", p.Kind, p.Trigger, verdictOf(p.Recorded.Gates), verdictOf(p.Shadow.Gates),
			len([]rune(p.Recorded.Text)), len([]rune(p.Shadow.Text)))
	}
	return tw.Flush()
}

// verdictOf is the first decision that was not a pass, else "passed".
func verdictOf(vs []gates.Verdict) string {
	for _, v := range vs {
		switch v.Outcome {
		case events.OutcomePassed, gates.OutcomeSkipped:
		default:
			if v.Code != "" {
				return v.Gate + " " + v.Outcome + " " + v.Code
			}
			return v.Gate + " " + v.Outcome
		}
	}
	return "passed"
}

func outcomes(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, o := range sortedSet(m) {
		parts = append(parts, fmt.Sprintf("%d %s", m[o], o))
	}
	return strings.Join(parts, ", ")
}

func sortedSet[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
