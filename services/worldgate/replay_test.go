package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/ai-worker/templates"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/worldgate/replay"
	"github.com/worldgate/worldgate/services/worldgate/stack"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/slowtest"
)

// The demo's traffic on the dev stack (real NATS, graphd, MCP servers, the scripted
// provider): `worldgate replay` regenerates every proposal the ai-worker's model roles made —
// first answers, cache hits, reprompts and fallback content — and each comes back
// byte-identical, committed ones of every AI kind among them. A template version that is gone
// or whose text changed, an unknown id and incomplete provenance are reported as such. Then
// `worldgate shadow` reruns the demo's triggers with a draft dialogue template, dry-runs the
// gates and prints the comparison, and no stream, bucket or graph count changes.
func TestReplayRegeneratesTheDemosProposals(t *testing.T) {
	slowtest.Skip(t, "end-to-end (the dev stack: replay and shadow of the demo's proposals)")
	ctx := context.Background()
	dir := t.TempDir()
	st, err := startStack(ctx, devFlags{dataDir: dir, host: "127.0.0.1", noDemo: true, idleTimeout: 3 * time.Minute}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	demoStart := time.Now()
	if _, err := st.runDemo(ctx); err != nil {
		t.Fatal(err)
	}
	idle, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := st.WaitIdle(idle); err != nil {
		t.Fatal(err)
	}
	_, js, err := st.ConnectAs(natsauth.Operator)
	if err != nil {
		t.Fatal(err)
	}
	emitted := aiProposals(t, js)
	committed := committedProposals(t, js)

	c := st.NATSCredentials(natsauth.Operator)
	args := []string{"-nats-url", st.NATS.ClientURL(), "-nats-user", c["user"], "-nats-password", c["password"],
		"-mcp-world-url", st.MCPURLs["world"], "-mcp-lore-url", st.MCPURLs["lore"], "-mcp-classify-url", st.MCPURLs["classify"],
		"-mcp-token", st.MCPToken, "-json"}
	run := func(id string) (string, error) {
		var out, stderr bytes.Buffer
		err := runReplay(ctx, append([]string{id}, args...), &out, &stderr)
		return out.String() + stderr.String(), err
	}

	buckets, err := budget.OpenBuckets(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	globalDay := func() budget.Usage {
		t.Helper()
		reports, err := budget.Reports(ctx, buckets, time.Now(), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reports {
			if r.Budget.Name == "global-day" {
				return r.Used
			}
		}
		t.Fatal("the demo's budgets have no global-day")
		return budget.Usage{}
	}
	spentBefore := globalDay()

	identical := map[string]int{} // kind → committed and replayed identically
	var fallbacks, reprompts, cacheHits, models int
	for _, p := range emitted {
		out, err := run(p.ProposalID)
		var rep replay.Report
		if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil || rep.ProposalID != p.ProposalID {
			if p.Provenance.InputRail != nil && len(p.Provenance.InputRail.Redactions) > 0 {
				continue // the redacted words are not recorded (checked below)
			}
			t.Fatalf("replay %s (%s, attempt %d): %v\n%s", p.ProposalID, p.Kind, p.Attempt, err, out)
		}
		if err != nil || !rep.Identical || !rep.ContextHashMatches {
			t.Errorf("replay %s (%s by %s, attempt %d, fallback %q): identical %v, context hash %v, err %v\n%s",
				p.ProposalID, p.Kind, p.AgentRole, p.Attempt, p.Provenance.Fallback, rep.Identical, rep.ContextHashMatches, err, out)
			continue
		}
		if string(rep.Replayed) != string(p.Payload) {
			t.Fatalf("replay %s says identical, but replayed %s, recorded %s", p.ProposalID, rep.Replayed, p.Payload)
		}
		switch {
		case rep.Fallback:
			fallbacks++
		default:
			models++
			if len(rep.Tools) != countExecuted(p) {
				t.Errorf("replay %s answered %d tool calls from the recording; the proposal recorded %d run ones", p.ProposalID, len(rep.Tools), countExecuted(p))
			}
		}
		if p.Attempt > 0 && !rep.Fallback {
			reprompts++
		}
		if p.Provenance.CacheHit {
			cacheHits++
		}
		if committed[p.ProposalID] && !rep.Fallback {
			identical[p.Kind]++
		}
	}
	t.Logf("replayed %d proposals byte-identically: %d written by the model (%d reprompts, %d cache hits), %d fallback; committed per kind %v",
		models+fallbacks, models, reprompts, cacheHits, fallbacks, identical)
	for _, kind := range []string{events.KindAmbience, events.KindNPCDialogue, events.KindQuestSeed} {
		if identical[kind] == 0 {
			t.Errorf("no committed %s written by the model was replayed identically (%v)", kind, identical)
		}
	}
	if fallbacks == 0 {
		t.Error("the demo's fallback content (the ghost NPC, the threat) was not replayed")
	}

	// The replays' model calls were paid for under the ai-workers' budgets, and the kill
	// switch stops them: a paused budget refuses the replay with a sentence.
	t.Run("paid for under the budgets", func(t *testing.T) {
		if after := globalDay(); after.Tokens <= spentBefore.Tokens || after.Micros <= spentBefore.Micros {
			t.Fatalf("%d model replays recorded no spend in global-day: %+v before, %+v after", models, spentBefore, after)
		}
		var model *events.Proposal
		for _, p := range emitted {
			if p.Provenance.Fallback == "" && (p.Provenance.InputRail == nil || len(p.Provenance.InputRail.Redactions) == 0) {
				model = p
				break
			}
		}
		if _, err := budget.Apply(ctx, buckets.Control, "global-day", budget.Change{Pause: true, By: "test"}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := budget.Apply(ctx, buckets.Control, "global-day", budget.Change{Resume: true, By: "test"}); err != nil {
				t.Fatal(err)
			}
		}()
		out, err := run(model.ProposalID)
		if err == nil || !strings.Contains(out, string(replay.ProblemBudget)) || !strings.Contains(out, "global-day is paused") {
			t.Fatalf("a replay under a paused budget should be refused, naming it: %v\n%s", err, out)
		}
	})

	t.Run("text output", func(t *testing.T) {
		var out, stderr bytes.Buffer
		err := runReplay(ctx, append([]string{emitted[0].ProposalID}, args[:len(args)-1]...), &out, &stderr)
		if err != nil || !strings.Contains(out.String(), "result    IDENTICAL") || !strings.Contains(out.String(), emitted[0].ProposalID) {
			t.Fatalf("replay %s: %v\n%s%s", emitted[0].ProposalID, err, out.String(), stderr.String())
		}
	})
	t.Run("unknown id", func(t *testing.T) {
		out, err := run("00000000-0000-5000-8000-000000000000")
		if err == nil || !strings.Contains(out, string(replay.ProblemUnknown)) {
			t.Fatalf("want unknown_proposal, got %v\n%s", err, out)
		}
	})

	t.Run("shadow run with a draft dialogue template", func(t *testing.T) {
		spec, ok := templates.Get("npc-dialogue")
		if !ok {
			t.Fatal("npc-dialogue is not registered")
		}
		draft := filepath.Join(dir, "npc-dialogue-draft.tmpl")
		text := strings.Replace(spec.Text, "Answer the player in character with\none or two sentences",
			"Answer the player in character with\none or two short sentences, and mention something you can see", 1)
		if text == spec.Text {
			t.Fatal("the draft did not change the template text")
		}
		if err := os.WriteFile(draft, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		before := worldState(t, st, js)
		shadowArgs := append([]string{"-from", demoStart.Add(-time.Second).Format(time.RFC3339Nano), "-template", "npc-dialogue@1.1.0=" + draft,
			"-graph-url", st.Graph.URL(), "-graph-user", stack.GraphReader, "-graph-password", st.GraphCredentials(stack.GraphReader)["password"]}, args...)
		var out, stderr bytes.Buffer
		if err := runShadow(ctx, shadowArgs, &out, &stderr); err != nil {
			t.Fatalf("shadow: %v\n%s%s", err, out.String(), stderr.String())
		}
		var rep ShadowReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out.String())
		}
		kinds := map[string]int{}
		changed := 0
		for _, p := range rep.Pairs {
			if p.Shadow == nil {
				if p.Skipped == "" {
					t.Errorf("pair %+v: no shadow and no reason", p)
				}
				continue
			}
			kinds[p.Kind]++
			want := p.Recorded.Template
			if p.Kind == events.KindNPCDialogue {
				want = "npc-dialogue@1.1.0"
			}
			if p.Shadow.Template != want || p.Shadow.ProposalID == p.Recorded.ProposalID {
				t.Errorf("%s shadow of %s: template %s (want %s), id %s", p.Kind, p.Recorded.ProposalID, p.Shadow.Template, want, p.Shadow.ProposalID)
			}
			if len(p.Shadow.Gates) == 0 || p.Shadow.Gates[0].Gate != gates.Schema || len(p.Recorded.Gates) == 0 {
				t.Errorf("%s shadow of %s: gates %+v, recorded %+v: want the route's checks on both sides", p.Kind, p.Recorded.ProposalID, p.Shadow.Gates, p.Recorded.Gates)
			}
			if p.Kind == events.KindNPCDialogue && p.Shadow.Text != p.Recorded.Text {
				changed++
			}
			if p.Kind != events.KindNPCDialogue && p.Shadow.Fallback == "" && p.Shadow.Text != p.Recorded.Text && len(p.LiveTools) == 0 {
				t.Errorf("%s: the template did not change, the tools were recorded, yet the text did: %q → %q", p.Kind, p.Recorded.Text, p.Shadow.Text)
			}
		}
		t.Logf("shadow: %d pairs %v, %d skipped, %d dialogues rewritten, live tools %v; recorded %+v; shadow %+v",
			len(rep.Pairs), kinds, rep.Skipped, changed, rep.LiveTools, rep.Recorded, rep.Shadow)
		for _, k := range []string{events.KindAmbience, events.KindNPCDialogue, events.KindQuestSeed} {
			if kinds[k] == 0 {
				t.Errorf("no %s was rerun", k)
			}
		}
		if changed == 0 || rep.Shadow.Proposals != rep.Recorded.Proposals || rep.Shadow.Distinct2 <= 0 || rep.Shadow.Tokens <= 0 || rep.Shadow.Gates[gates.Schema][events.OutcomePassed] == 0 {
			t.Errorf("summary: recorded %+v, shadow %+v, %d dialogues rewritten", rep.Recorded, rep.Shadow, changed)
		}
		// The text report: the same comparison, side by side.
		out.Reset()
		if err := runShadow(ctx, shadowArgs[:len(shadowArgs)-1], &out, &stderr); err != nil {
			t.Fatalf("shadow: %v\n%s", err, stderr.String())
		}
		for _, want := range []string{"shadow run: template npc-dialogue@1.1.0", "gate schema", "distinct-2", "tokens", "npc-dialogue@1.1.0"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the text report lacks %q:\n%s", want, out.String())
			}
		}
		t.Logf("worldgate shadow:\n%s", out.String())
		if after := worldState(t, st, js); !maps.Equal(before, after) {
			t.Errorf("the shadow runs changed the system:\nbefore %v\nafter  %v", before, after)
		}
	})

	// The rest tamper with a real recording in memory: the streams stay as they are.
	var model *events.Proposal
	for _, p := range emitted {
		if p.Provenance.Fallback == "" && p.Kind == events.KindNPCDialogue && len(p.Provenance.ToolCalls) > 0 &&
			(p.Provenance.InputRail == nil || len(p.Provenance.InputRail.Redactions) == 0) {
			model = p
			break
		}
	}
	if model == nil {
		t.Fatal("no dialogue written by the model with tool calls")
	}
	rec, err := findRecording(ctx, js, model.ProposalID, time.Now().Add(-time.Hour))
	if err != nil || rec == nil || rec.Trigger == nil {
		t.Fatalf("recording of %s: %+v, %v", model.ProposalID, rec, err)
	}
	var f regenFlags
	f.worldURL, f.loreURL, f.classifyURL, f.mcpToken = st.MCPURLs["world"], st.MCPURLs["lore"], st.MCPURLs["classify"], st.MCPToken
	r, tools, err := f.replayer(ctx, nil, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer tools.Close()
	tampered := func(change func(p *events.Proposal, rec *replay.Recording)) replay.Recording {
		p := *rec.Proposal
		pv := *p.Provenance
		tpl := *pv.PromptTemplate
		pv.PromptTemplate, pv.ToolCalls = &tpl, append([]events.ToolCall(nil), pv.ToolCalls...)
		p.Provenance = &pv
		c := replay.Recording{Proposal: &p, Trigger: rec.Trigger, Rejection: rec.Rejection}
		change(&p, &c)
		return c
	}
	for _, tc := range []struct {
		name   string
		change func(p *events.Proposal, rec *replay.Recording)
		want   replay.Problem
		says   string
	}{
		{"template version gone", func(p *events.Proposal, _ *replay.Recording) { p.Provenance.PromptTemplate.Version = "0.9.0" },
			replay.ProblemTemplateGone, "npc-dialogue@0.9.0 is not registered"},
		{"template text changed", func(p *events.Proposal, _ *replay.Recording) {
			p.Provenance.PromptTemplate.SHA256 = strings.Repeat("ab", 32)
		}, replay.ProblemTemplateChanged, "its text changed without a new version"},
		{"tool result missing", func(p *events.Proposal, _ *replay.Recording) { p.Provenance.ToolCalls[0].Result = nil },
			replay.ProblemIncomplete, "has no recorded result"},
		{"trigger gone", func(_ *events.Proposal, rec *replay.Recording) { rec.Trigger = nil },
			replay.ProblemIncomplete, "is not on stream WORLD"},
		{"no model", func(p *events.Proposal, _ *replay.Recording) { p.Provenance.Model = "" },
			replay.ProblemIncomplete, "provenance.model"},
		{"deterministic role", func(p *events.Proposal, _ *replay.Recording) { p.AgentRole = roles.WorldRules },
			replay.ProblemNotReplayable, "without a model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := r.Replay(ctx, tampered(tc.change))
			var re *replay.Error
			if !errors.As(err, &re) || re.Problem != tc.want || !strings.Contains(re.Error(), tc.says) {
				t.Fatalf("want %s saying %q, got %+v, %v", tc.want, tc.says, rep, err)
			}
		})
	}
	t.Run("a tool call the recording lacks", func(t *testing.T) {
		dropped := rec.Proposal.Provenance.ToolCalls[0].Tool
		lacking := tampered(func(p *events.Proposal, _ *replay.Recording) { p.Provenance.ToolCalls = p.Provenance.ToolCalls[1:] })
		// A replay never calls a tool: the model is told the call failed, and the report says so.
		rep, err := r.Replay(ctx, lacking)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(rep.Tools, replay.ToolUse{Tool: dropped, Source: replay.SourceMissing}) || !strings.Contains(rep.Note, "does not hold") {
			t.Errorf("replay without the %s result: tools %+v, note %q", dropped, rep.Tools, rep.Note)
		}
		// A shadow run calls it live (read-only) and reports it.
		pair := r.Shadow(ctx, lacking, nil, replay.Variant{}, func(context.Context, *events.Proposal) []gates.Verdict { return nil })
		if pair.Shadow == nil || !slices.Contains(pair.LiveTools, dropped) {
			t.Errorf("shadow without the %s result: %+v", dropped, pair)
		}
	})
	t.Run("another model differs and shows a diff", func(t *testing.T) {
		// The same recording on the rich tier's model: the scripted provider writes richer
		// content for a "large" model, so the payload differs and the report shows how.
		rep, err := r.Replay(ctx, tampered(func(p *events.Proposal, _ *replay.Recording) { p.Provenance.Model = "scripted-large" }))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Identical || rep.Diff == "" || !strings.Contains(rep.Diff, "line") {
			t.Fatalf("want a difference in the line, got identical %v diff %q", rep.Identical, rep.Diff)
		}
	})
}

// worldState is what a shadow run must leave as it is: every stream's (and so every KV
// bucket's) last sequence, and the graph's vertex and edge counts. The budgets' spend windows
// are left out: a shadow run's model calls are paid for, and recorded there; so is the members
// bucket, where each event-processor replica renews its key every second (liveness, not the
// world: a slow shadow run once saw it move from 20 to 21).
func worldState(t *testing.T, st *devStack, js jetstream.JetStream) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]uint64{}
	streams := js.ListStreams(ctx)
	for si := range streams.Info() {
		if si.Config.Name == "KV_"+natsx.BucketBudgetShort || si.Config.Name == "KV_"+natsx.BucketBudgetLong || si.Config.Name == "KV_"+natsx.BucketMembers {
			continue
		}
		out["stream "+si.Config.Name] = si.State.LastSeq
	}
	if err := streams.Err(); err != nil {
		t.Fatal(err)
	}
	for name, count := range map[string]func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal{
		"graph vertices": func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal { return g.V().Count() },
		"graph edges":    func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal { return g.E().Count() },
	} {
		res, err := st.GraphRO.Submit(ctx, count)
		if err != nil || len(res) != 1 {
			t.Fatalf("%s: %v %v", name, res, err)
		}
		n, ok := res[0].(int64)
		if !ok {
			t.Fatalf("%s: %T %v", name, res[0], res[0])
		}
		out[name] = uint64(n)
	}
	return out
}

// aiProposals are the proposals the ai-worker's model roles emitted, in stream order.
func aiProposals(t *testing.T, js jetstream.JetStream) []*events.Proposal {
	t.Helper()
	var out []*events.Proposal
	for _, data := range streamBodies(t, js, events.StreamProposals, events.SubjectEmitAll) {
		p, err := events.DecodeProposal(data)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := roles.Lookup(p.AgentRole); ok && r.UsesLLM {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("the demo emitted no AI proposal")
	}
	return out
}

// committedProposals are the ids of the proposals the event-processor committed.
func committedProposals(t *testing.T, js jetstream.JetStream) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, data := range streamBodies(t, js, events.StreamCommitted, "") {
		var de events.DomainEvent
		if err := json.Unmarshal(data, &de); err != nil {
			t.Fatal(err)
		}
		out[de.ProposalID] = true
	}
	return out
}

// streamBodies reads every message of stream (on subject filter, "" for all) now in it.
func streamBodies(t *testing.T, js jetstream.JetStream, stream, filter string) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.OrderedConsumerConfig{}
	if filter != "" {
		cfg.FilterSubjects = []string{filter}
	}
	c, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		batch, err := c.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			out = append(out, m.Data())
		}
		if n == 0 {
			return out
		}
	}
}

// countExecuted is how many of p's recorded tool calls reached a server (the ones a replay
// answers from the recording; refusals over the budget or allow-list never did).
func countExecuted(p *events.Proposal) int {
	n := 0
	for _, c := range p.Provenance.ToolCalls {
		if c.Server != "none" && !strings.HasPrefix(c.Error, "not run:") {
			n++
		}
	}
	return n
}
