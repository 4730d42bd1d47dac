package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Journey is one correlation id's way through the pipeline, rebuilt from the streams: the
// envelope, every proposal made for it with each gate decision, then the commits, rejections
// and dead letters, with the tokens and cost spent.
type Journey struct {
	CorrelationID string `json:"correlationId"`
	// Outcome: committed, rejected, held (waiting for approval), dead-lettered, no-proposal
	// (the agents proposed nothing) or in-flight.
	Outcome     string              `json:"outcome"`
	Start       time.Time           `json:"start"` // when the envelope (else the first message) reached JetStream
	Envelope    *TraceEnvelope      `json:"envelope,omitempty"`
	Proposals   []*TraceProposal    `json:"proposals"`
	Committed   []TraceCommit       `json:"committed,omitempty"`
	DeadLetters []TraceDeadLetter   `json:"deadLetters,omitempty"`
	Tokens      events.Tokens       `json:"tokens"`
	CostUSD     float64             `json:"costUsd"`
	Scanned     map[string]ScanInfo `json:"scanned"` // what the search read, per stream
}

// TraceEnvelope is the world event that started the journey.
type TraceEnvelope struct {
	EventID     string    `json:"eventId"`
	Type        string    `json:"type"`
	Source      string    `json:"source"`
	Actor       string    `json:"actor"`
	OccurredUTC time.Time `json:"occurredUtc"`
	Received    time.Time `json:"received"`
	Subject     string    `json:"subject"`
}

// TraceProposal is one proposal: who made it and how, and what each gate said.
type TraceProposal struct {
	proposal   *events.Proposal // the copy with the longest trail, to verify its hops
	ProposalID string           `json:"proposalId"`
	Kind       string           `json:"kind"`
	AgentRole  string           `json:"agentRole"`
	Attempt    int              `json:"attempt"`
	Issued     time.Time        `json:"issued"`
	OffsetMs   float64          `json:"offsetMs"`
	// FollowsUp names the refused proposal this one regenerates (a reprompt, or the fallback).
	FollowsUp string `json:"followsUp,omitempty"`
	Fallback  string `json:"fallback,omitempty"`
	// Downgraded: a spending budget moved the call to a cheaper tier ("rich→cheap: why").
	Downgraded string `json:"downgraded,omitempty"`
	// InputRail is what the input rail did with the player's words before any model call.
	InputRail *events.InputRail `json:"inputRail,omitempty"`
	// Narrator is the outside narrator who wrote the proposal (mcp-propose; no model call).
	Narrator *events.Narration `json:"narrator,omitempty"`

	Provider  string        `json:"provider,omitempty"`
	Model     string        `json:"model,omitempty"`
	Template  string        `json:"template,omitempty"`
	ToolCalls int           `json:"toolCalls"`
	Tokens    events.Tokens `json:"tokens"`
	CostUSD   float64       `json:"costUsd"`
	LatencyMs float64       `json:"latencyMs"`
	CacheHit  bool          `json:"cacheHit,omitempty"`

	Decisions  []TraceDecision  `json:"decisions"`
	Rejections []TraceRejection `json:"rejections,omitempty"`
	Validated  *time.Time       `json:"validated,omitempty"`
	// Final: committed, rejected, validated (not yet committed), held or in-flight.
	Final string `json:"final"`
}

// TraceDecision is one gate's decision, from the proposal's routing slip.
type TraceDecision struct {
	Gate       string    `json:"gate"`
	Outcome    string    `json:"outcome"`
	Code       string    `json:"code,omitempty"`
	At         time.Time `json:"at"`
	OffsetMs   float64   `json:"offsetMs"`
	DurationMs float64   `json:"durationMs"`
	// The hop's attestation: the gate's key id, the emitter the schema gate read from the
	// subject, the authenticated approver; Verified is set when trace was given the gates'
	// public keys (-attest-keys), with Problem saying why a signature does not verify.
	// SignedWith is the gate of the hop whose signature covers this one, where the gates of
	// one process signed their run once (docs/attestation.md); KeyID is then that signature's.
	KeyID      string `json:"keyId,omitempty"`
	SignedWith string `json:"signedWith,omitempty"`
	Emitter    string `json:"emitter,omitempty"`
	Approver   string `json:"approver,omitempty"`
	Verified   *bool  `json:"verified,omitempty"`
	Problem    string `json:"problem,omitempty"`
}

// TraceRejection is a refusal as published on proposals.rejected.<gate>.
type TraceRejection struct {
	Gate       string    `json:"gate"`
	Code       string    `json:"code"`
	Reason     string    `json:"reason"`
	Transient  bool      `json:"transient,omitempty"`
	RetryAfter float64   `json:"retryAfter,omitempty"`
	At         time.Time `json:"at"`
	OffsetMs   float64   `json:"offsetMs"`
}

// TraceCommit is a domain event the event-processor applied.
type TraceCommit struct {
	EventID    string    `json:"eventId"`
	Type       string    `json:"type"`
	ProposalID string    `json:"proposalId"`
	Committed  time.Time `json:"committed"`
	OffsetMs   float64   `json:"offsetMs"`
}

// TraceDeadLetter is a message of the journey that a stage gave up on.
type TraceDeadLetter struct {
	Stage    string    `json:"stage"`
	Reason   string    `json:"reason"`
	Subject  string    `json:"subject"`
	At       time.Time `json:"at"`
	OffsetMs float64   `json:"offsetMs"`
}

// ScanInfo is what the search read of one stream.
type ScanInfo struct {
	From    time.Time `json:"from"`
	Headers int       `json:"headers"` // messages whose headers were read
	Bodies  int       `json:"bodies"`  // messages fetched whole
	Matched int       `json:"matched"`
}

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `Usage: worldgate trace <correlationId> [flags]

Rebuilds one journey from the streams: the envelope, each proposal and gate decision with its
timing, then the commit or the rejection and its reason, with tokens and cost. It reads message
headers only (JetStream sends no bodies) from -since ago on WORLD, then from the envelope's time
on PROPOSALS, COMMITTED and DLQ in parallel, and fetches just the matching messages.`)
		fs.PrintDefaults()
	}
	var n natsFlags
	n.register(fs)
	since := fs.Duration("since", 24*time.Hour, "how far back the journey may have started (bounds the scan)")
	asJSON := fs.Bool("json", false, "print the journey as JSON")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	attestKeys := fs.String("attest-keys", "", "directory of the gates' public keys (<gate>.pub): verify each hop's signature (worldgate dev: <data-dir>/keys)")
	id, err := parseWithID(fs, args)
	if err != nil {
		return err
	}
	if id == "" {
		fs.Usage()
		return exitError{2}
	}
	nc, js, err := natsx.Connect(n.as("worldgate-trace"), logx.Discard())
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	j, err := findJourney(ctx, js, id, time.Now().Add(-*since))
	if err != nil {
		return err
	}
	if j == nil {
		return fmt.Errorf("no message with correlation id %q on WORLD, PROPOSALS, COMMITTED or DLQ since %s; widen -since if it is older",
			id, time.Now().Add(-*since).UTC().Format(time.RFC3339))
	}
	if *attestKeys != "" {
		ring, err := attest.LoadKeyring(*attestKeys)
		if err != nil {
			return err
		}
		verifyJourney(j, ring)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(j)
	}
	return printJourney(stdout, j)
}

// found is one message of the journey.
type found struct {
	stream, subject string
	seq             uint64
	at              time.Time
	header          nats.Header
	data            []byte
}

// findJourney collects the journey's messages. The envelope is looked for on WORLD from since;
// PROPOSALS, COMMITTED and DLQ are read from the envelope's time on (they cannot hold the
// journey's messages before it), in parallel. It returns nil when nothing matches.
func findJourney(ctx context.Context, js jetstream.JetStream, id string, since time.Time) (*Journey, error) {
	scanned := map[string]ScanInfo{}
	world, info, err := scanStream(ctx, js, events.StreamWorld, id, since)
	if err != nil {
		return nil, err
	}
	scanned[events.StreamWorld] = info
	from := since
	if len(world) > 0 {
		from = world[0].at.Add(-time.Second) // one JetStream clock; a second of slack
	}
	rest := []string{events.StreamProposals, events.StreamCommitted, events.StreamDLQ}
	results := make([][]found, len(rest))
	infos := make([]ScanInfo, len(rest))
	errs := make([]error, len(rest))
	var wg sync.WaitGroup
	for i, stream := range rest {
		wg.Go(func() { results[i], infos[i], errs[i] = scanStream(ctx, js, stream, id, from) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	all := world
	for i, stream := range rest {
		all = append(all, results[i]...)
		scanned[stream] = infos[i]
	}
	if len(all) == 0 {
		return nil, nil
	}
	j := buildJourney(id, all)
	j.Scanned = scanned
	return j, nil
}

// scanStream reads the headers of stream's messages from start up to its last message when the
// scan began, and returns the whole messages whose correlation header is id. A message without
// the header (an envelope from a publisher that did not set it) is fetched and matched on its
// body's correlationId.
func scanStream(ctx context.Context, js jetstream.JetStream, stream, id string, start time.Time) ([]found, ScanInfo, error) {
	info := ScanInfo{From: start}
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, info, nil
	}
	if err != nil {
		return nil, info, fmt.Errorf("stream %s: %w", stream, err)
	}
	si, err := s.Info(ctx)
	if err != nil {
		return nil, info, fmt.Errorf("stream %s: %w", stream, err)
	}
	last := si.State.LastSeq
	if si.State.Msgs == 0 || si.State.LastTime.Before(start) {
		return nil, info, nil
	}
	var match, unlabelled []uint64
	info.Headers, err = scanHeaders(ctx, s, start, last, func(seq uint64, h nats.Header) bool {
		switch h.Get(events.HeaderCorrelationID) {
		case id:
			match = append(match, seq)
		case "":
			unlabelled = append(unlabelled, seq)
		}
		return false
	})
	if err != nil {
		return nil, info, fmt.Errorf("read %s: %w", stream, err)
	}
	var out []found
	get := func(seq uint64) (*jetstream.RawStreamMsg, error) {
		info.Bodies++
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil // removed since (limits, purge)
		}
		return m, err
	}
	for _, seq := range unlabelled {
		m, err := get(seq)
		if err != nil {
			return nil, info, fmt.Errorf("read %s #%d: %w", stream, seq, err)
		}
		var body struct {
			CorrelationID string `json:"correlationId"`
		}
		if m != nil && json.Unmarshal(m.Data, &body) == nil && body.CorrelationID == id {
			out = append(out, found{stream, m.Subject, seq, m.Time, m.Header, m.Data})
		}
	}
	for _, seq := range match {
		m, err := get(seq)
		if err != nil {
			return nil, info, fmt.Errorf("read %s #%d: %w", stream, seq, err)
		}
		if m != nil {
			out = append(out, found{stream, m.Subject, seq, m.Time, m.Header, m.Data})
		}
	}
	slices.SortFunc(out, func(a, b found) int { return cmp.Compare(a.seq, b.seq) })
	info.Matched = len(out)
	return out, info, nil
}

// scanHeaders reads the headers of s's messages from start up to sequence last, handing each to
// fn until fn returns true; it returns how many it read.
func scanHeaders(ctx context.Context, s jetstream.Stream, start time.Time, last uint64, fn func(seq uint64, h nats.Header) (stop bool)) (int, error) {
	return scanMessages(ctx, s, start, last, true, func(seq uint64, m jetstream.Msg) bool { return fn(seq, m.Headers()) })
}

// scanMessages reads s's messages (their headers only when headersOnly) from start up to
// sequence last, handing each to fn until fn returns true; it returns how many it read.
func scanMessages(ctx context.Context, s jetstream.Stream, start time.Time, last uint64, headersOnly bool, fn func(seq uint64, m jetstream.Msg) (stop bool)) (int, error) {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start, HeadersOnly: headersOnly}
	return natsx.Scan(ctx, s, cfg, last, func(m jetstream.Msg, meta *jetstream.MsgMetadata) bool { return fn(meta.Sequence.Stream, m) })
}

// buildJourney assembles the journey from its messages.
func buildJourney(id string, msgs []found) *Journey {
	j := &Journey{CorrelationID: id, Proposals: []*TraceProposal{}}
	slices.SortStableFunc(msgs, func(a, b found) int { return a.at.Compare(b.at) })
	j.Start = msgs[0].at
	byID := map[string]*TraceProposal{}
	fullest := map[string]*events.Proposal{} // the copy with the longest routing slip
	seen := func(p *events.Proposal, at time.Time) *TraceProposal {
		tp := byID[p.ProposalID]
		if tp == nil {
			tp = &TraceProposal{ProposalID: p.ProposalID, Kind: p.Kind, AgentRole: p.AgentRole, Attempt: p.Attempt, Issued: at, Final: "in-flight"}
			byID[p.ProposalID] = tp
			j.Proposals = append(j.Proposals, tp)
		}
		if f := fullest[p.ProposalID]; f == nil || len(p.Route.Trail) >= len(f.Route.Trail) {
			fullest[p.ProposalID] = p
		}
		return tp
	}
	for _, m := range msgs {
		switch {
		case m.stream == events.StreamWorld:
			var env events.Envelope
			if json.Unmarshal(m.data, &env) != nil || j.Envelope != nil {
				continue
			}
			j.Envelope = &TraceEnvelope{EventID: env.EventID, Type: env.Type, Source: env.Source, Actor: actorName(env.Actor),
				OccurredUTC: env.OccurredUTC, Received: m.at, Subject: m.subject}
			j.Start = m.at
		case m.stream == events.StreamCommitted:
			var de events.DomainEvent
			if json.Unmarshal(m.data, &de) == nil {
				j.Committed = append(j.Committed, TraceCommit{EventID: de.EventID, Type: de.Type, ProposalID: de.ProposalID, Committed: de.CommittedUTC})
			}
		case m.stream == events.StreamDLQ:
			j.DeadLetters = append(j.DeadLetters, TraceDeadLetter{Stage: m.header.Get(events.HeaderDLQStage), Reason: m.header.Get(events.HeaderDLQReason),
				Subject: m.header.Get(events.HeaderDLQSubject), At: m.at})
		case strings.HasPrefix(m.subject, "proposals.rejected."):
			var r events.Rejection
			if json.Unmarshal(m.data, &r) != nil {
				continue
			}
			p := r.Proposal
			if p == nil {
				p = &events.Proposal{ProposalID: r.ProposalID, Kind: r.Kind, AgentRole: r.AgentRole, Attempt: r.Attempt}
			}
			tp := seen(p, m.at)
			tp.Rejections = append(tp.Rejections, TraceRejection{Gate: r.Gate, Code: string(r.Code), Reason: r.Reason,
				Transient: r.Transient, RetryAfter: r.RetryAfter, At: cmp.Or(r.RejectedUTC, m.at)})
		default: // proposals.gate.<g>, proposals.validated, proposals.approval
			var p events.Proposal
			if json.Unmarshal(m.data, &p) != nil || p.ProposalID == "" {
				continue
			}
			tp := seen(&p, m.at)
			if d := m.header.Get(events.HeaderAIDowngrade); d != "" {
				tp.Downgraded = d
			}
			if events.IsValidated(m.subject) && tp.Validated == nil {
				at := m.at
				tp.Validated = &at
			}
		}
	}
	ms := func(t time.Time) float64 { return float64(t.Sub(j.Start).Microseconds()) / 1000 }
	committed := map[string]bool{}
	for i := range j.Committed {
		j.Committed[i].OffsetMs = ms(j.Committed[i].Committed)
		committed[j.Committed[i].ProposalID] = true
	}
	for i := range j.DeadLetters {
		j.DeadLetters[i].OffsetMs = ms(j.DeadLetters[i].At)
	}
	for _, tp := range j.Proposals {
		p := fullest[tp.ProposalID]
		tp.OffsetMs = ms(tp.Issued)
		if pv := p.Provenance; pv != nil {
			tp.Provider, tp.Model, tp.Tokens, tp.CostUSD, tp.LatencyMs = pv.Provider, pv.Model, pv.Tokens, pv.CostUSD, pv.LatencyMs
			tp.ToolCalls, tp.CacheHit, tp.Fallback, tp.InputRail, tp.Narrator = len(pv.ToolCalls), pv.CacheHit, pv.Fallback, pv.InputRail, pv.Narrator
			if pv.PromptTemplate != nil {
				tp.Template = pv.PromptTemplate.ID + "@" + pv.PromptTemplate.Version
			}
			j.Tokens.Prompt += pv.Tokens.Prompt
			j.Tokens.Completion += pv.Tokens.Completion
			j.Tokens.Cached += pv.Tokens.Cached
			j.CostUSD += pv.CostUSD
		}
		tp.proposal = p
		tp.Decisions = decisionsOf(p, ms)
		for i := range tp.Rejections {
			tp.Rejections[i].OffsetMs = ms(tp.Rejections[i].At)
		}
		// The routing slip orders the decisions without trusting clocks: a proposal whose last
		// hop refused it, or that the event-processor refused, stopped there.
		switch last := lastDecision(tp); {
		case committed[tp.ProposalID]:
			tp.Final = "committed"
		case len(tp.Rejections) > 0 && (last == nil || last.Outcome == events.OutcomeRejected ||
			slices.ContainsFunc(tp.Rejections, func(r TraceRejection) bool { return r.Gate == "processor" })):
			tp.Final = "rejected"
		case tp.Validated != nil:
			tp.Final = "validated"
		case last != nil && last.Outcome == events.OutcomeHeld:
			tp.Final = "held"
		}
	}
	// A follow-up (reprompt or fallback) regenerates the previous attempt of the same role.
	for _, tp := range j.Proposals {
		for _, prev := range j.Proposals {
			if tp.Attempt > 0 && prev.AgentRole == tp.AgentRole && prev.Attempt == tp.Attempt-1 && prev.Kind == tp.Kind {
				tp.FollowsUp = prev.ProposalID
			}
		}
	}
	j.Outcome = journeyOutcome(j)
	return j
}

// decisionsOf is p's trail as trace shows it, ms giving each hop's offset.
func decisionsOf(p *events.Proposal, ms func(time.Time) float64) []TraceDecision {
	var out []TraceDecision
	for i, h := range p.Route.Trail {
		d := TraceDecision{Gate: h.Gate, Outcome: h.Outcome, Code: h.Code, At: h.At, OffsetMs: ms(h.At), DurationMs: h.DurationMs,
			KeyID: h.KeyID, Emitter: h.Emitter, Approver: h.Approver}
		if _, to, ok := attest.Covering(p.Route.Trail, i); ok && to != i {
			d.KeyID, d.SignedWith = p.Route.Trail[to].KeyID, p.Route.Trail[to].Gate
		}
		out = append(out, d)
	}
	return out
}

// verifyJourney checks every hop's signature against ring (the gates' public keys).
func verifyJourney(j *Journey, ring *attest.Keyring) {
	for _, tp := range j.Proposals {
		p := tp.proposal
		if p == nil || len(p.Route.Trail) != len(tp.Decisions) {
			continue
		}
		digest, err := attest.Digest(p)
		for i := range tp.Decisions {
			d := &tp.Decisions[i]
			if err == nil {
				err = ring.CheckHop(p, digest, i)
			}
			ok := err == nil
			d.Verified = &ok
			if err != nil {
				d.Problem = err.Error()
			}
			err = nil
		}
	}
}

func lastDecision(tp *TraceProposal) *TraceDecision {
	if len(tp.Decisions) == 0 {
		return nil
	}
	return &tp.Decisions[len(tp.Decisions)-1]
}

func journeyOutcome(j *Journey) string {
	finals := map[string]int{}
	for _, tp := range j.Proposals {
		finals[tp.Final]++
	}
	switch {
	case len(j.Committed) > 0:
		return "committed"
	case len(j.DeadLetters) > 0:
		return "dead-lettered"
	case len(j.Proposals) == 0:
		return "no-proposal"
	case finals["in-flight"] > 0 || finals["validated"] > 0:
		return "in-flight"
	case finals["held"] > 0:
		return "held"
	default:
		return "rejected"
	}
}

// printJourney writes the journey as a timeline, times relative to its start.
func printJourney(w io.Writer, j *Journey) error {
	var b strings.Builder
	rejected := 0
	for _, tp := range j.Proposals {
		if tp.Final == "rejected" {
			rejected++
		}
	}
	fmt.Fprintf(&b, "journey %s: %s · %d proposal(s), %d committed event(s), %d rejected · tokens %d (prompt %d, completion %d, cached %d) · cost $%.6f\n",
		j.CorrelationID, strings.ToUpper(j.Outcome), len(j.Proposals), len(j.Committed), rejected,
		j.Tokens.Prompt+j.Tokens.Completion, j.Tokens.Prompt, j.Tokens.Completion, j.Tokens.Cached, j.CostUSD)
	fmt.Fprintf(&b, "start %s (times below are from it)\n\n", j.Start.UTC().Format(time.RFC3339Nano))
	line := func(offset float64, what, text string) {
		fmt.Fprintf(&b, "%10s  %-10s %s\n", offsetText(offset), what, text)
	}
	if e := j.Envelope; e != nil {
		line(0, "envelope", fmt.Sprintf("%s %s by %s from %s (occurred %s) on %s", e.Type, e.EventID, e.Actor, e.Source,
			e.OccurredUTC.UTC().Format(time.RFC3339Nano), e.Subject))
	}
	for _, tp := range j.Proposals {
		b.WriteString("\n")
		head := fmt.Sprintf("%s · %s · attempt %d · %s", tp.ProposalID, tp.Kind, tp.Attempt, tp.AgentRole)
		line(tp.OffsetMs, "proposal", head)
		switch {
		case tp.FollowsUp != "" && tp.Fallback != "":
			line(tp.OffsetMs, "", "  fallback content after "+tp.FollowsUp+" was refused: "+tp.Fallback)
		case tp.FollowsUp != "":
			line(tp.OffsetMs, "", "  reprompt of "+tp.FollowsUp+" with its rejection reason")
		case tp.Fallback != "":
			line(tp.OffsetMs, "", "  fallback content: "+tp.Fallback)
		}
		if tp.Downgraded != "" {
			line(tp.OffsetMs, "", "  budget downgrade "+tp.Downgraded)
		}
		if r := tp.InputRail; r != nil {
			desc := "passed"
			switch {
			case len(r.Blocked) > 0:
				desc = "blocked (" + strings.Join(r.Blocked, ", ") + "): no model call"
			case len(r.Flagged) > 0:
				desc = "flagged " + strings.Join(r.Flagged, ", ") + ", kept as data"
			}
			for _, rd := range r.Redactions {
				desc += fmt.Sprintf("; %d %s redacted from %s", rd.Count, rd.Kind, rd.Field)
			}
			line(tp.OffsetMs, "", "  input rail: "+desc+" · policy "+r.PolicyVersion)
		}
		if n := tp.Narrator; n != nil {
			line(tp.OffsetMs, "", fmt.Sprintf("  written by narrator %s (%s %s)", n.Client, n.Server, n.Tool))
		}
		if tp.Model != "" {
			cache := ""
			if tp.CacheHit {
				cache = " · cache hit"
			}
			line(tp.OffsetMs, "", fmt.Sprintf("  %s/%s · template %s · %d tool call(s) · tokens %d+%d · $%.6f · model %.0fms%s",
				tp.Provider, tp.Model, cmp.Or(tp.Template, "-"), tp.ToolCalls, tp.Tokens.Prompt, tp.Tokens.Completion, tp.CostUSD, tp.LatencyMs, cache))
		}
		rej := 0
		for _, d := range tp.Decisions {
			text := fmt.Sprintf("%-9s %-8s %8.1fms", d.Gate, d.Outcome, d.DurationMs)
			if d.Code != "" {
				text += "  " + d.Code
			}
			if d.Emitter != "" {
				text += "  emitter " + d.Emitter
			}
			if d.Approver != "" {
				text += "  by " + d.Approver
			}
			with := ""
			if d.SignedWith != "" {
				with = " (with the " + d.SignedWith + " hop)"
			}
			switch {
			case d.KeyID == "":
				text += "  UNSIGNED"
			case d.Verified == nil:
				text += "  signed " + d.KeyID + with
			case *d.Verified:
				text += "  signed " + d.KeyID + with + " ✓"
			default:
				text += "  signed " + d.KeyID + with + " ✗ " + d.Problem
			}
			line(d.OffsetMs, "  gate", text)
			if d.Outcome == events.OutcomeRejected && rej < len(tp.Rejections) && tp.Rejections[rej].Gate == d.Gate {
				r := tp.Rejections[rej]
				rej++
				if r.Transient {
					line(d.OffsetMs, "", fmt.Sprintf("    %s (transient; retry after %gs)", r.Reason, r.RetryAfter))
				} else {
					line(d.OffsetMs, "", "    "+r.Reason)
				}
			}
		}
		if tp.Validated != nil {
			line(float64(tp.Validated.Sub(j.Start).Microseconds())/1000, "  validated", "proposals.validated")
		}
		for _, r := range tp.Rejections[rej:] { // refusals after the gates (the event-processor's)
			line(r.OffsetMs, "  refused", fmt.Sprintf("by %s: %s: %s", r.Gate, r.Code, r.Reason))
		}
		for _, c := range j.Committed {
			if c.ProposalID == tp.ProposalID {
				line(c.OffsetMs, "committed", fmt.Sprintf("%s %s", c.Type, c.EventID))
			}
		}
		if tp.Final == "rejected" && len(tp.Rejections) > 0 {
			r := tp.Rejections[len(tp.Rejections)-1]
			line(r.OffsetMs, "REJECTED", fmt.Sprintf("by %s: %s", r.Gate, r.Code))
		}
	}
	for _, d := range j.DeadLetters {
		line(d.OffsetMs, "DEAD", fmt.Sprintf("stage %s gave up on %s: %s", d.Stage, d.Subject, d.Reason))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func offsetText(ms float64) string {
	if ms < 1000 {
		return fmt.Sprintf("+%.0fms", ms)
	}
	return fmt.Sprintf("+%.3fs", ms/1000)
}

// actorName is kind:id, or just the id when it already names its kind (player:ana).
func actorName(a events.Actor) string {
	if strings.HasPrefix(a.ID, a.Kind+":") {
		return a.ID
	}
	return a.Kind + ":" + a.ID
}
