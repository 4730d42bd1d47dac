package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/telemetry"
	"github.com/worldgate/worldgate/shared/tracing"
)

// One run of the whole dev stack (tracing on, to an in-memory exporter) with two journeys
// published through the CLI: a greeting to an NPC who exists, which is committed, and one to
// an NPC who does not, which every attempt fails at the invariant gate. `worldgate trace`
// rebuilds both from the streams; the spans of the committed journey form one trace across
// every hop; and every event name in the logs is a catalogued one with its dimensions.
func TestTraceRebuildsCommittedAndRejectedJourneys(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	defer tracing.Use(tp)()

	dir := t.TempDir()
	logPath := filepath.Join(dir, "worldgate.log")
	logOut, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logOut.Close()
	ctx := context.Background()
	st, err := startStack(ctx, devFlags{dataDir: dir, host: "127.0.0.1", noDemo: true}, logx.New(logOut, "worldgate-dev", "info"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	url := st.NATS.ClientURL()
	as := func(role string) []string {
		c := st.NATSCredentials(role)
		return []string{"-nats-url", url, "-nats-user", c["user"], "-nats-password", c["password"]}
	}
	for id, ev := range map[string]struct{ typ, payload string }{
		"trace-commit": {events.PlayerSpokeToNPC, `{"playerId":"player:cass","npcId":"npc:oren","locationId":"loc:tavern","utterance":"Any news from the mines?"}`},
		"trace-reject": {events.PlayerSpokeToNPC, `{"playerId":"player:ana","npcId":"npc:ghost","locationId":"loc:ash-gate","utterance":"Hello? Is anyone there?"}`},
		// Two move requests, for the world-rules agent's log events.
		"move-ok":      {events.PlayerMoveRequested, `{"playerId":"player:ana","fromLocationId":"loc:ash-gate","direction":"north"}`},
		"move-refused": {events.PlayerMoveRequested, `{"playerId":"player:ana","fromLocationId":"loc:ash-gate","direction":"west"}`},
	} {
		var stderr bytes.Buffer
		var named struct {
			PlayerID string `json:"playerId"`
		}
		if err := json.Unmarshal([]byte(ev.payload), &named); err != nil {
			t.Fatal(err)
		}
		args := append(as(natsauth.Publisher), "-type", ev.typ, "-actor", "player:"+named.PlayerID, "-correlation-id", id, "-payload", ev.payload)
		if err := runPublish(ctx, args, &bytes.Buffer{}, &stderr); err != nil {
			t.Fatalf("publish %s: %v\n%s", id, err, stderr.String())
		}
	}
	idle, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := st.WaitIdle(idle); err != nil {
		t.Fatal(err)
	}
	trace := func(t *testing.T, args ...string) (string, error) {
		var out, stderr bytes.Buffer
		err := runTrace(ctx, append(args, as(natsauth.Operator)...), &out, &stderr)
		return out.String() + stderr.String(), err
	}
	journey := func(t *testing.T, id string) *Journey {
		out, err := trace(t, id, "-json")
		if err != nil {
			t.Fatalf("trace %s -json: %v\n%s", id, err, out)
		}
		var j Journey
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		return &j
	}

	t.Run("committed", func(t *testing.T) {
		j := journey(t, "trace-commit")
		if j.Outcome != "committed" || j.Envelope == nil || j.Envelope.Type != events.PlayerSpokeToNPC || len(j.Proposals) != 1 {
			t.Fatalf("journey %+v: want one proposal from the envelope, committed", j)
		}
		p := j.Proposals[0]
		want, err := route.Default().For(events.KindNPCDialogue)
		if err != nil {
			t.Fatal(err)
		}
		var gates []string
		last := 0.0
		for _, d := range p.Decisions {
			gates = append(gates, d.Gate)
			if d.Outcome != events.OutcomePassed || d.OffsetMs < last || d.DurationMs < 0 {
				t.Errorf("decision %+v after +%.1fms: want passed, in order", d, last)
			}
			last = d.OffsetMs
		}
		if !slices.Equal(gates, want) {
			t.Errorf("gate decisions %v, want the npc_dialogue route %v", gates, want)
		}
		if p.Final != "committed" || p.Model == "" || p.Template == "" || p.ToolCalls == 0 || p.OffsetMs <= 0 {
			t.Errorf("proposal %+v: want committed, with model, template and tool calls, after the envelope", p)
		}
		if j.Tokens.Prompt == 0 || j.Tokens.Completion == 0 || j.CostUSD <= 0 || j.Tokens != p.Tokens {
			t.Errorf("totals tokens %+v cost %v: want the proposal's non-zero usage %+v", j.Tokens, j.CostUSD, p.Tokens)
		}
		if len(j.Committed) != 1 || j.Committed[0].Type != "NPCDialogueAccepted" || j.Committed[0].ProposalID != p.ProposalID ||
			j.Committed[0].OffsetMs < last {
			t.Errorf("committed %+v: want NPCDialogueAccepted of %s after the last gate (+%.1fms)", j.Committed, p.ProposalID, last)
		}
		if j.Scanned[events.StreamWorld].Matched != 1 || j.Scanned[events.StreamProposals].Headers == 0 ||
			j.Scanned[events.StreamProposals].Bodies != j.Scanned[events.StreamProposals].Matched {
			t.Errorf("scan %+v: want one envelope, and bodies fetched only for matching proposals", j.Scanned)
		}

		text, err := trace(t, "trace-commit")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"journey trace-commit: COMMITTED", "envelope", "Player.SpokeToNPC", p.ProposalID,
			"npc_dialogue · attempt 0", "schema", "audit", "passed", "committed  NPCDialogueAccepted", p.Model} {
			if !strings.Contains(text, want) {
				t.Errorf("timeline lacks %q:\n%s", want, text)
			}
		}
		t.Log("\n" + text)
	})

	t.Run("rejected", func(t *testing.T) {
		j := journey(t, "trace-reject")
		if j.Outcome != "rejected" || len(j.Committed) != 0 || len(j.Proposals) < 2 {
			t.Fatalf("journey %+v: want several refused proposals and no commit", j)
		}
		for i, p := range j.Proposals {
			if p.Final != "rejected" || p.Attempt != i || len(p.Rejections) == 0 {
				t.Fatalf("proposal %d %+v: want attempt %d, refused", i, p, i)
			}
			r := p.Rejections[len(p.Rejections)-1]
			if r.Gate != gates.Invariant || r.Code != string(events.CodeInvariantViolation) || !strings.Contains(r.Reason, "npc:ghost") {
				t.Errorf("proposal %d refused by %+v: want the invariant gate naming npc:ghost", i, r)
			}
			if d := p.Decisions[len(p.Decisions)-1]; d.Gate != gates.Invariant || d.Outcome != events.OutcomeRejected || d.Code != r.Code {
				t.Errorf("proposal %d's last decision %+v: want the invariant gate's refusal", i, d)
			}
			if i > 0 && (p.FollowsUp != j.Proposals[i-1].ProposalID || p.OffsetMs < j.Proposals[i-1].Rejections[0].OffsetMs) {
				t.Errorf("proposal %d follows up %q at +%.1fms: want %s, after its rejection", i, p.FollowsUp, p.OffsetMs, j.Proposals[i-1].ProposalID)
			}
		}
		if last := j.Proposals[len(j.Proposals)-1]; last.Fallback == "" {
			t.Errorf("the last attempt %+v should be the static fallback", last)
		}
		text, err := trace(t, "trace-reject")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"journey trace-reject: REJECTED", "INVARIANT_VIOLATION", "npc:ghost", "reprompt of " + j.Proposals[0].ProposalID,
			"REJECTED   by invariant: INVARIANT_VIOLATION", "fallback content after"} {
			if !strings.Contains(text, want) {
				t.Errorf("timeline lacks %q:\n%s", want, text)
			}
		}
		t.Log("\n" + text)
	})

	t.Run("unknown", func(t *testing.T) {
		out, err := trace(t, "no-such-journey", "-since", "1h")
		if err == nil || !strings.Contains(err.Error(), `no message with correlation id "no-such-journey"`) {
			t.Fatalf("got %v\n%s", err, out)
		}
	})

	t.Run("one trace across the hops", func(t *testing.T) {
		var traceIDs []string
		handlers := map[string]bool{}
		for _, s := range exp.GetSpans() {
			for _, kv := range s.Attributes {
				if kv.Key == tracing.AttrCorrelationID && kv.Value.AsString() == "trace-commit" {
					traceIDs = append(traceIDs, s.SpanContext.TraceID().String())
					handlers[s.Name] = true
				}
			}
		}
		slices.Sort(traceIDs)
		if len(slices.Compact(traceIDs)) != 1 {
			t.Fatalf("the committed journey's spans are in %d traces, want 1", len(slices.Compact(slices.Clone(traceIDs))))
		}
		for _, h := range []string{"publish world.events.player.spoketonpc", "gate-schema", "gate-audit", "event-processor"} {
			if !handlers[h] {
				t.Errorf("no span %q in the journey's trace; spans: %v", h, handlers)
			}
		}
		// The audit gate's record, published beside the pipeline, points into the same trace.
		audit, _, err := scanStream(ctx, st.JS, events.StreamAudit, "trace-commit", time.Now().Add(-time.Hour))
		if err != nil || len(audit) != 1 || !strings.Contains(audit[0].header.Get(events.HeaderTraceParent), traceIDs[0]) {
			t.Errorf("audit records %+v (%v): want one, in trace %s", audit, err, traceIDs[0])
		}
	})

	t.Run("logs use the telemetry catalog", func(t *testing.T) {
		st.stop() // flush every worker's last lines
		f, err := os.Open(logPath)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		counts := map[string]int{}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("not a JSON log line: %s", sc.Text())
			}
			if err := telemetry.Check(rec); err != nil {
				t.Error(err)
			}
			msg, _ := rec["msg"].(string)
			counts[msg]++
		}
		for _, name := range []string{telemetry.PromptIssued, telemetry.PromptRejected, telemetry.PromptReprompted, telemetry.PromptFallback,
			telemetry.PromptAbandoned, telemetry.MoveProposed, telemetry.MoveRefused, telemetry.GatePassed, telemetry.GateRejected,
			telemetry.CommitApplied} {
			if counts[name] == 0 {
				t.Errorf("the run logged no %s", name)
			}
		}
	})
}

// BenchmarkTraceFind measures looking up one journey among 20 000 other messages on PROPOSALS
// with no envelope to narrow the window, so every header from -since on is read: the cost of
// a trace on a busy stream.
func BenchmarkTraceFind(b *testing.B) {
	const others = 20000
	e := natstest.Start(b)
	body := []byte(`{"proposalId":"p","kind":"ambience","route":{"pending":["schema"]}}`)
	var futures []jetstream.PubAckFuture
	settle := func() {
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
		futures = futures[:0]
	}
	for i := range others + 1 {
		msg := &nats.Msg{Subject: "proposals.gate.schema", Data: body, Header: nats.Header{}}
		id := "other-" + strconv.Itoa(i)
		if i == others/2 {
			id = "needle"
		}
		msg.Header.Set(events.HeaderCorrelationID, id)
		f, err := e.JS.PublishMsgAsync(msg)
		if err != nil {
			b.Fatal(err)
		}
		if futures = append(futures, f); len(futures) == 1000 {
			settle()
		}
	}
	settle()
	since := time.Now().Add(-time.Hour)
	for b.Loop() {
		j, err := findJourney(context.Background(), e.JS, "needle", since)
		if err != nil {
			b.Fatal(err)
		}
		if s := j.Scanned[events.StreamProposals]; s.Headers != others+1 || s.Matched != 1 || s.Bodies != 1 {
			b.Fatalf("scan %+v", s)
		}
	}
	b.ReportMetric(others+1, "headers/op")
}

// The cases the dev-stack test does not produce, built from messages as the pipeline writes
// them: a transient refusal retried and then committed, a refusal by the event-processor after
// every gate passed, and a proposal held for approval.
func TestBuildJourneyReadsRetriesCommitConflictsAndHolds(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	hop := func(gate, outcome, code string, ms int) events.Hop {
		return events.Hop{Gate: gate, Outcome: outcome, Code: code, At: at(ms), DurationMs: 1}
	}
	prop := func(id string, trail ...events.Hop) *events.Proposal {
		return &events.Proposal{ProposalID: id, Kind: events.KindAmbience, AgentRole: "ambience", CorrelationID: "c",
			Provenance: &events.Provenance{Provider: "scripted", Model: "m", Tokens: events.Tokens{Prompt: 10, Completion: 5}, CostUSD: 0.5},
			Route:      events.Route{Trail: trail}}
	}
	msg := func(stream, subject string, ms int, v any) found {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return found{stream: stream, subject: subject, at: at(ms), data: b}
	}
	rateRefusal := hop(gates.Rate, events.OutcomeRejected, string(events.CodeRateLimited), 20)
	retried := prop("p-retry", hop(gates.Schema, events.OutcomePassed, "", 10), rateRefusal,
		hop(gates.Rate, events.OutcomePassed, "", 1020), hop(gates.Audit, events.OutcomePassed, "", 1030))
	conflict := prop("p-conflict", hop(gates.Schema, events.OutcomePassed, "", 12), hop(gates.Audit, events.OutcomePassed, "", 14))
	held := prop("p-held", hop(gates.Approval, events.OutcomeHeld, "", 16))
	j := buildJourney("c", []found{
		msg(events.StreamWorld, "world.events.player.moved", 0, events.Envelope{EventID: "e", Type: events.PlayerMoved, CorrelationID: "c"}),
		msg(events.StreamProposals, events.GateSubject(gates.Schema), 5, prop("p-retry")),
		msg(events.StreamProposals, events.RejectedSubject(gates.Rate), 21, events.Rejection{ProposalID: "p-retry", Gate: gates.Rate,
			Code: events.CodeRateLimited, Reason: "over budget", Transient: true, RetryAfter: 1, RejectedUTC: at(20),
			Proposal: prop("p-retry", hop(gates.Schema, events.OutcomePassed, "", 10), rateRefusal)}),
		msg(events.StreamProposals, "proposals.validated.3."+events.OrderToken("npc:x"), 1031, retried),
		msg(events.StreamCommitted, "world.committed.ambiencegenerated", 1040, events.DomainEvent{EventID: "d", Type: "AmbienceGenerated",
			ProposalID: "p-retry", CommittedUTC: at(1040)}),
		msg(events.StreamProposals, "proposals.validated.3."+events.OrderToken("npc:x"), 15, conflict),
		msg(events.StreamProposals, events.RejectedSubject("processor"), 30, events.Rejection{ProposalID: "p-conflict", Gate: "processor",
			Code: events.CodeCommitConflict, Reason: "the exit exists", RejectedUTC: at(30), Proposal: conflict}),
		msg(events.StreamProposals, events.SubjectApproval, 17, held),
	})
	finals := map[string]string{}
	for _, p := range j.Proposals {
		finals[p.ProposalID] = p.Final
	}
	if want := map[string]string{"p-retry": "committed", "p-conflict": "rejected", "p-held": "held"}; !maps.Equal(finals, want) {
		t.Fatalf("finals %v, want %v", finals, want)
	}
	if j.Outcome != "committed" || j.Tokens.Prompt != 30 || j.CostUSD != 1.5 {
		t.Errorf("outcome %s tokens %+v cost %v: want committed, each proposal counted once", j.Outcome, j.Tokens, j.CostUSD)
	}
	retry := j.Proposals[0]
	if len(retry.Decisions) != 4 || retry.Decisions[1].Code != string(events.CodeRateLimited) || retry.Decisions[2].OffsetMs != 1020 {
		t.Errorf("retried proposal's decisions %+v: want the refusal, then the rate gate passing at +1020ms", retry.Decisions)
	}
	var out bytes.Buffer
	if err := printJourney(&out, j); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"over budget (transient; retry after 1s)", "refused  by processor: COMMIT_CONFLICT: the exit exists",
		"REJECTED   by processor: COMMIT_CONFLICT", "approval  held", "committed  AmbienceGenerated d"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("timeline lacks %q:\n%s", want, out.String())
		}
	}
}
