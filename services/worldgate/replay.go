package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/services/worldgate/replay"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/natsx"
)

func init() {
	commands["replay"] = command{"replay <proposalId>: regenerate an AI proposal from its provenance and compare (or -json)", runReplay}
}

// regenFlags are the flags of the commands that regenerate proposals (replay, shadow): where
// the recordings are, which models answer, and the MCP servers that list the offered tools.
type regenFlags struct {
	nats                           natsFlags
	since, timeout                 time.Duration
	asJSON                         bool
	llmConfig                      string
	worldURL, loreURL, classifyURL string
	mcpToken                       string
}

func (f *regenFlags) register(fs *flag.FlagSet) {
	f.nats.register(fs)
	fs.DurationVar(&f.since, "since", 24*time.Hour, "how far back the streams are searched")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	fs.StringVar(&f.llmConfig, "llm-config", "", "YAML provider configuration of the models (services/ai-worker/llmsetup); empty: the embedded scripted provider")
	fs.StringVar(&f.worldURL, "mcp-world-url", "http://127.0.0.1:7401/mcp", "mcp-world Streamable HTTP endpoint (lists the tools the model is offered)")
	fs.StringVar(&f.loreURL, "mcp-lore-url", "http://127.0.0.1:7402/mcp", "mcp-lore Streamable HTTP endpoint")
	fs.StringVar(&f.classifyURL, "mcp-classify-url", "http://127.0.0.1:7403/mcp", "mcp-classify Streamable HTTP endpoint")
	fs.StringVar(&f.mcpToken, "mcp-token", "", "bearer token for the MCP servers (scopes world:read, lore:read, classify:read)")
}

// replayer connects what a regeneration needs: the models, paid for under the ai-workers'
// budgets (the ledger on js's budget buckets: every call reserves and settles in the same
// windows and obeys the same pauses; js nil: no budget), and the MCP servers. The ledger
// follows the budget controls until ctx ends.
func (f *regenFlags) replayer(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (r *replay.Replayer, tools *client.Client, err error) {
	o := llmsetup.Options{Logger: log}
	if js != nil {
		b, err := budget.OpenBuckets(ctx, js)
		if err != nil {
			return nil, nil, err
		}
		ledger, err := budget.OpenLedger(ctx, b, budget.Options{Logger: log})
		if err != nil {
			return nil, nil, err
		}
		if err := ledger.Start(ctx); err != nil {
			return nil, nil, err
		}
		o.Admitter = ledger
	}
	var provider *llm.Registry
	if f.llmConfig != "" {
		provider, err = llmsetup.Load(f.llmConfig, o)
	} else {
		provider, err = llmsetup.Default(o)
	}
	if err != nil {
		return nil, nil, err
	}
	tools, err = client.New(ctx, client.Config{Logger: log, Servers: []client.ServerConfig{
		{Name: "world", URL: f.worldURL, Token: f.mcpToken},
		{Name: "lore", URL: f.loreURL, Token: f.mcpToken},
		{Name: "classify", URL: f.classifyURL, Token: f.mcpToken},
	}})
	if err != nil {
		return nil, nil, fmt.Errorf("MCP servers (they list the tools the model was offered): %w", err)
	}
	r, err = replay.New(replay.Config{LLM: provider, Tools: tools, Routes: route.Default(), Logger: log})
	if err != nil {
		tools.Close()
		return nil, nil, err
	}
	return r, tools, nil
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `Usage: worldgate replay <proposalId> [flags]

Regenerates an AI proposal from its recorded provenance: the trigger event (WORLD), the
template version (whose SHA-256 must still match), the tool results recorded in the proposal,
and the model and its parameters; a reprompt also gets the refusal it answered. The model is
called again (no tool is: the recorded results answer), and the command reports whether the
payload came back byte-identical, with a diff when it did not. Nothing is published.
Exit status 1 when the output differs or the proposal cannot be replayed.`)
		fs.PrintDefaults()
	}
	var f regenFlags
	f.register(fs)
	id, err := parseWithID(fs, args)
	if err != nil {
		return err
	}
	if id == "" {
		fs.Usage()
		return exitError{2}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	nc, js, err := natsx.Connect(f.nats.as("worldgate-replay"), logx.Discard())
	if err != nil {
		return err
	}
	defer nc.Close()
	rec, err := findRecording(ctx, js, id, time.Now().Add(-f.since))
	if err != nil {
		return err
	}
	var rep *replay.Report
	if rec == nil {
		err = &replay.Error{Problem: replay.ProblemUnknown, ProposalID: id,
			Message: fmt.Sprintf("no proposal %s on stream %s since %s; widen -since if it is older", id, events.StreamProposals,
				time.Now().Add(-f.since).UTC().Format(time.RFC3339))}
	} else {
		r, tools, cerr := f.replayer(ctx, js, logx.Discard())
		if cerr != nil {
			return cerr
		}
		defer tools.Close()
		rep, err = r.Replay(ctx, *rec)
	}
	var re *replay.Error
	if errors.As(err, &re) {
		if f.asJSON {
			_ = json.NewEncoder(stdout).Encode(struct {
				Error *replay.Error `json:"error"`
			}{re})
			return exitError{1}
		}
		return err
	}
	if err != nil {
		return err
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printReplay(stdout, rep)
	}
	if !rep.Identical {
		return exitError{1}
	}
	return nil
}

func printReplay(w io.Writer, r *replay.Report) {
	fmt.Fprintf(w, "proposal  %s (%s by %s, attempt %d)\n", r.ProposalID, r.Kind, r.AgentRole, r.Attempt)
	fmt.Fprintf(w, "template  %s sha256 %s\n", r.Template, r.TemplateSHA256)
	fmt.Fprintf(w, "model     %s (replayed on %s)\n", r.Model, r.ReplayedModel)
	if r.Fallback {
		fmt.Fprintln(w, "fallback  yes: regenerated from the fallback table")
	}
	recorded, live, missing := 0, 0, 0
	for _, u := range r.Tools {
		switch u.Source {
		case replay.SourceRecorded:
			recorded++
		case replay.SourceLive:
			live++
		case replay.SourceMissing:
			missing++
		}
	}
	fmt.Fprintf(w, "tools     %d answered from the recording, %d not recorded\n", recorded, missing+live)
	fmt.Fprintf(w, "context   hash %s\n", map[bool]string{true: "recomputed identically", false: "differs"}[r.ContextHashMatches])
	if r.Note != "" {
		fmt.Fprintf(w, "note      %s\n", r.Note)
	}
	if r.Identical {
		fmt.Fprintf(w, "result    IDENTICAL: the payload came back byte for byte (%d bytes)\n", len(r.Replayed))
		return
	}
	fmt.Fprintln(w, "result    DIFFERENT (- recorded, + replayed):")
	fmt.Fprintln(w, r.Diff)
}

// findRecording gathers what the streams hold of proposal id from since on: the proposal (its
// first copy on PROPOSALS), its trigger on WORLD, and for a reprompt the refusal of the
// previous attempt. It returns nil when no message on PROPOSALS carries the id.
func findRecording(ctx context.Context, js jetstream.JetStream, id string, since time.Time) (*replay.Recording, error) {
	corr, err := correlationOf(ctx, js, id, since)
	if err != nil || corr == "" {
		return nil, err
	}
	world, _, err := scanStream(ctx, js, events.StreamWorld, corr, since)
	if err != nil {
		return nil, err
	}
	props, _, err := scanStream(ctx, js, events.StreamProposals, corr, since)
	if err != nil {
		return nil, err
	}
	return recordingOf(id, world, props), nil
}

// recordingOf picks proposal id, its trigger and the refusal it answers out of one journey's
// messages.
func recordingOf(id string, world, props []found) *replay.Recording {
	rec := &replay.Recording{}
	var rejections []*events.Rejection
	for _, m := range props {
		if strings.HasPrefix(m.subject, "proposals.rejected.") {
			var r events.Rejection
			if json.Unmarshal(m.data, &r) == nil && r.Proposal != nil {
				rejections = append(rejections, &r)
			}
			continue
		}
		if rec.Proposal != nil {
			continue
		}
		var p events.Proposal
		if json.Unmarshal(m.data, &p) == nil && p.ProposalID == id {
			rec.Proposal = &p
		}
	}
	if rec.Proposal == nil {
		return nil
	}
	p := rec.Proposal
	for _, m := range world {
		if env, err := events.DecodeEnvelope(m.data); err == nil && env.EventID == p.CausationID {
			rec.Trigger = env
			break
		}
	}
	// The refusal a reprompt answers: the previous attempt's non-transient one.
	for _, r := range rejections {
		if !r.Transient && r.Proposal.AgentRole == p.AgentRole && r.Proposal.CausationID == p.CausationID && r.Proposal.Attempt == p.Attempt-1 {
			rec.Rejection = r
		}
	}
	return rec
}

// correlationOf finds the correlation id of proposal id from the headers of PROPOSALS (every
// copy's Nats-Msg-Id starts with the proposal id); "" when none does.
func correlationOf(ctx context.Context, js jetstream.JetStream, id string, since time.Time) (string, error) {
	s, err := js.Stream(ctx, events.StreamProposals)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", events.StreamProposals, err)
	}
	si, err := s.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", events.StreamProposals, err)
	}
	if si.State.Msgs == 0 || si.State.LastTime.Before(since) {
		return "", nil
	}
	corr := ""
	_, err = scanHeaders(ctx, s, since, si.State.LastSeq, func(_ uint64, h nats.Header) bool {
		if strings.HasPrefix(h.Get(events.HeaderMsgID), id+":") {
			corr = h.Get(events.HeaderCorrelationID)
		}
		return corr != ""
	})
	if err != nil {
		return "", fmt.Errorf("read %s: %w", events.StreamProposals, err)
	}
	return corr, nil
}
