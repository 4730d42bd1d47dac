package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/provenance"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
	"github.com/worldgate/worldgate/services/worldgate/replay"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// TestNPCRemembersTheLastExchange (issue #21, done when): on the embedded stack a player speaks
// to an NPC twice. The memory-writer records the first committed exchange; the second
// proposal's context (its recorded get-recent-dialogue result, hashed into the context hash)
// includes it, and the NPC's second line refers to what the player said the first time; the
// replay of the second proposal is byte-identical. The player's e-mail address, redacted by
// the input rail, is remembered redacted.
func TestNPCRemembersTheLastExchange(t *testing.T) {
	st := startQuietStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, pub, err := st.ConnectAs(natsauth.Publisher)
	if err != nil {
		t.Fatal(err)
	}
	_, js, err := st.ConnectAs(natsauth.Operator)
	if err != nil {
		t.Fatal(err)
	}
	store, err := memory.Open(ctx, js, memory.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	talk := func(utterance string) (*events.Outcome, *events.Proposal) {
		t.Helper()
		env := envelope(t, events.PlayerSpokeToNPC, "player:ana", events.PlayerSpokeToNPCPayload{
			PlayerID: "player:ana", NPCID: "npc:oren", LocationID: "loc:tavern", Utterance: utterance})
		got, err := events.Await(ctx, pub, env)
		if err != nil {
			t.Fatal(err)
		}
		o := got[0]
		if o.Kind != events.OutcomeCommitted || o.Event == nil {
			t.Fatalf("%q: outcome %s %+v, want the NPC's committed line", utterance, o.Kind, o.Refusal)
		}
		return o, validated(ctx, t, js, o.Event.ProposalID)
	}

	const first = "Where can I find the old mill? Write to me at ana@example.com."
	o1, p1 := talk(first)
	var line1 events.NPCDialoguePayload
	if err := json.Unmarshal(o1.Event.Payload, &line1); err != nil {
		t.Fatal(err)
	}
	if p1.Provenance.Provider != "scripted" || line1.PlayerSaid != "Where can I find the old mill? Write to me at [email]." {
		t.Fatalf("first line: provider %s, playerSaid %q (want the rail's redaction)", p1.Provenance.Provider, line1.PlayerSaid)
	}
	natstest.WaitFor(t, 30*time.Second, "the memory-writer records the first exchange", func() bool {
		d, err := store.Dialogue(ctx, "npc:oren", "player:ana")
		return err == nil && len(d.Exchanges) == 1
	})
	d, _ := store.Dialogue(ctx, "npc:oren", "player:ana")
	if x := d.Exchanges[0]; x.PlayerSaid != line1.PlayerSaid || x.NPCLine != line1.Line || x.EventID != o1.Event.EventID {
		t.Fatalf("remembered %+v, want the committed exchange %+v", x, line1)
	}

	o2, p2 := talk("And what became of the miller?")
	var memCall *events.ToolCall
	for i, c := range p2.Provenance.ToolCalls {
		if c.Tool == "get-recent-dialogue" {
			memCall = &p2.Provenance.ToolCalls[i]
		}
	}
	if memCall == nil || memCall.Server != "world" || memCall.Error != "" {
		t.Fatalf("the second proposal's tool calls %+v: want get-recent-dialogue on mcp-world", p2.Provenance.ToolCalls)
	}
	var recalled worldtools.RecentDialogueOutput
	if err := json.Unmarshal(memCall.Result, &recalled); err != nil {
		t.Fatal(err)
	}
	if len(recalled.Exchanges) != 1 || recalled.Exchanges[0].PlayerSaid != line1.PlayerSaid || recalled.Exchanges[0].NPCLine != line1.Line {
		t.Fatalf("the second proposal's context recalls %+v, want the first exchange", recalled.Exchanges)
	}
	// The memory is part of the context hash: it recomputes from the recorded results, and
	// without the memory's result it would differ.
	ch, err := provenance.ContextHash(string(events.KindNPCDialogue), p2.Provenance.PromptTemplate.SHA256, provenance.ToolResults(p2.Provenance.ToolCalls), p2.Provenance.Model)
	if err != nil || ch != p2.Provenance.ContextHash {
		t.Fatalf("context hash %s does not recompute (%s, %v)", p2.Provenance.ContextHash, ch, err)
	}
	var line2 events.NPCDialoguePayload
	if err := json.Unmarshal(o2.Event.Payload, &line2); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(line2.Line, "Where can I find the old mill?") || strings.Contains(line2.Line, "ana@example.com") {
		t.Fatalf("the second line %q does not refer to what the player said the first time", line2.Line)
	}
	t.Logf("first: %q → %q; second: %q → %q", line1.PlayerSaid, line1.Line, line2.PlayerSaid, line2.Line)

	// `worldgate replay` regenerates the second proposal from its recording, the memory's
	// result among the recorded tool results: byte-identical.
	c := st.NATSCredentials(natsauth.Operator)
	var out, stderr bytes.Buffer
	err = runReplay(ctx, []string{p2.ProposalID, "-nats-url", st.NATS.ClientURL(), "-nats-user", c["user"], "-nats-password", c["password"],
		"-mcp-world-url", st.MCPURLs["world"], "-mcp-lore-url", st.MCPURLs["lore"], "-mcp-classify-url", st.MCPURLs["classify"],
		"-mcp-token", st.MCPToken, "-json"}, &out, &stderr)
	var rep replay.Report
	if jerr := json.Unmarshal(out.Bytes(), &rep); err != nil || jerr != nil {
		t.Fatalf("replay %s: %v %v\n%s%s", p2.ProposalID, err, jerr, out.String(), stderr.String())
	}
	fromMemory := slices.ContainsFunc(rep.Tools, func(u replay.ToolUse) bool {
		return u.Tool == "get-recent-dialogue" && u.Source == replay.SourceRecorded
	})
	if !rep.Identical || !rep.ContextHashMatches || rep.Fallback || !fromMemory || rep.Replayed != string(p2.Payload) {
		t.Fatalf("replay of the second proposal: identical %v, context hash %v, memory from the recording %v\n%s", rep.Identical, rep.ContextHashMatches, fromMemory, out.String())
	}
}

// validated is the proposal as it reached proposals.validated.
func validated(ctx context.Context, t *testing.T, js jetstream.JetStream, id string) *events.Proposal {
	t.Helper()
	c, err := js.OrderedConsumer(ctx, events.StreamProposals, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectValidatedAll}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) || err != nil {
			t.Fatalf("proposal %s not on %s: %v", id, events.SubjectValidatedAll, err)
		}
		p, err := events.Decoder{}.Proposal(m.Data())
		if err == nil && p.ProposalID == id {
			return p
		}
	}
}
