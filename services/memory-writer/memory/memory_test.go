package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// dialogue is a committed npc_dialogue event, the n-th of its pair.
func dialogue(npc, player string, n int, said, line string) events.DomainEvent {
	payload, _ := json.Marshal(events.NPCDialoguePayload{NPCID: npc, PlayerID: player, LocationID: "loc:square", Line: line, Intent: "inform", PlayerSaid: said})
	id := fmt.Sprintf("evt-%s-%s-%03d", npc, player, n)
	return events.DomainEvent{EventID: id, Type: "NPCDialogueAccepted", ProposalID: "p-" + id, Kind: events.KindNPCDialogue,
		CorrelationID: "c-" + id, OccurredUTC: t0, CommittedUTC: t0.Add(time.Duration(n) * time.Second), Payload: payload}
}

func TestDialogueKeepsTheLastExchangesInCommitOrder(t *testing.T) {
	l := memory.Limits{Exchanges: 3, TextLen: 20}
	var d memory.Dialogue
	for _, n := range []int{2, 1, 4, 3, 5} { // committed out of order across replicas
		e := memory.Exchange{EventID: fmt.Sprint(n), At: t0.Add(time.Duration(n) * time.Second), NPCLine: strings.Repeat("é", 30)}
		var ok bool
		if d, ok = d.Add(e, l); !ok {
			t.Fatalf("exchange %d not added", n)
		}
	}
	if _, ok := d.Add(memory.Exchange{EventID: "5"}, l); ok {
		t.Fatal("a redelivered exchange was added twice")
	}
	if got := len(d.Exchanges); got != 3 || d.Exchanges[0].EventID != "3" || d.Exchanges[2].EventID != "5" {
		t.Fatalf("kept %+v, want 3, 4, 5", d.Exchanges)
	}
	if line := d.Exchanges[0].NPCLine; len(line) > 20 || !strings.HasSuffix(line, "…") || !json.Valid([]byte(fmt.Sprintf("%q", line))) {
		t.Fatalf("a long line kept as %q (%d bytes)", line, len(line))
	}
	if last := d.Last(2); len(last) != 2 || last[0].EventID != "5" {
		t.Fatalf("Last(2) = %+v, want newest first", last)
	}
}

// The writer, run by the worker runtime on the real COMMITTED stream: exchanges and NPC notes
// are recorded once each (a republished event is a duplicate), and an undecodable event is
// dead-lettered, not retried for ever.
func TestWriterRecordsCommittedDialogue(t *testing.T) {
	env := natstest.Start(t)
	ctx := context.Background()
	store, err := memory.Open(ctx, env.JS, memory.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	app, err := runtime.New(runtime.Options{Name: memory.Name, Conn: env.Conn, JetStream: env.JS, Registerer: reg, Logger: logx.Discard(), Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	w, err := memory.Register(app, store, reg, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	_ = w
	runtimetest.Start(t, app)

	publish := func(evt events.DomainEvent, msgID string) {
		raw, _ := json.Marshal(evt)
		if _, err := env.JS.Publish(ctx, events.CommittedSubject(evt.Type), raw, jetstream.WithMsgID(msgID)); err != nil {
			t.Fatal(err)
		}
	}
	first := dialogue("npc:mira", "player:ada", 1, "Where is the old mill?", "North, past the bridge.")
	publish(first, "a")
	publish(dialogue("npc:mira", "player:ada", 2, "And the miller?", "Gone these three winters."), "b")
	publish(dialogue("npc:mira", "player:bo", 1, "Hello.", "Well met."), "c")
	publish(first, "a-again") // the same event in another message
	moved, _ := json.Marshal(events.PlayerMovedPayload{PlayerID: "player:ada", FromLocationID: "loc:square", ToLocationID: "loc:gate", Direction: "north"})
	// A move names no NPC: the writer's consumer does not receive it at all. A faction names none
	// either but is received, and ignored.
	publish(events.DomainEvent{EventID: "evt-move", Type: "PlayerMoved", ProposalID: "p-move", Kind: events.KindPlayerMoved, CorrelationID: "c", CommittedUTC: t0, Payload: moved}, "d")
	faction, _ := json.Marshal(events.FactionCreatedPayload{FactionID: "faction:millers", Name: "The Millers"})
	publish(events.DomainEvent{EventID: "evt-faction", Type: "FactionCreated", ProposalID: "p-faction", Kind: events.KindFactionCreated, CorrelationID: "c", CommittedUTC: t0, Payload: faction}, "f")
	publish(events.DomainEvent{EventID: "evt-bad", Type: "NPCDialogueAccepted", Kind: events.KindNPCDialogue, Payload: json.RawMessage(`{"npcId":"npc:mira"}`)}, "e")

	count := func(o string) float64 {
		m, _ := reg.Gather()
		for _, f := range m {
			if f.GetName() == "worldgate_memory_events_total" {
				for _, s := range f.GetMetric() {
					if s.GetLabel()[0].GetValue() == o {
						return s.GetCounter().GetValue()
					}
				}
			}
		}
		return -1
	}
	// The same event in two messages may be handled concurrently, so which of the two changed
	// which record can vary; what is recorded cannot.
	natstest.WaitFor(t, 20*time.Second, "every event handled", func() bool {
		return count(memory.OutcomeRecorded)+count(memory.OutcomeDuplicate) == 4 && count(memory.OutcomeIgnored) == 1 &&
			natstest.StreamMsgs(t, env.JS, events.StreamDLQ, "") == 1
	})
	natstest.WaitFor(t, 10*time.Second, "nothing left to deliver", func() bool {
		c, err := env.JS.Consumer(ctx, events.StreamCommitted, memory.Name)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	if n := count(memory.OutcomeIgnored); n != 1 {
		t.Fatalf("%v events ignored, want 1 (the faction): the move reached the writer", n)
	}
	d, err := store.Dialogue(ctx, "npc:mira", "player:ada")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Exchanges) != 2 || d.Exchanges[0].PlayerSaid != "Where is the old mill?" || d.Exchanges[1].NPCLine != "Gone these three winters." {
		t.Fatalf("ada's dialogue with mira: %+v", d)
	}
	s, err := store.Summary(ctx, "npc:mira")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Notes) != 3 || !slices.ContainsFunc(s.Notes, func(n memory.Note) bool { return strings.Contains(n.Text, `said to player:bo: "Well met."`) }) {
		t.Fatalf("mira's notes: %+v", s.Notes)
	}
	if none, _ := store.Dialogue(ctx, "npc:mira", "player:cy"); len(none.Exchanges) != 0 {
		t.Fatalf("a pair that never spoke has %+v", none)
	}
}

// Many pairs, one chatty pair, and a bucket far smaller than the default: every record stays
// within its limits, the bucket within its bytes, and what no longer fits is counted as
// dropped (acknowledged, never redelivered) rather than failing the writer.
func TestMemoryStaysBoundedUnderManyPairs(t *testing.T) {
	env := natstest.Start(t)
	ctx := context.Background()
	const maxBytes = 96 << 10
	if err := env.JS.DeleteKeyValue(ctx, natsx.BucketMemory); err != nil {
		t.Fatal(err)
	}
	topo := natsx.DefaultTopology(natsx.TopologyOptions{Limits: map[string]natsx.Limits{natsx.BucketMemory: {MaxBytes: maxBytes}}})
	if err := natsx.Provision(ctx, env.JS, topo, logx.Discard()); err != nil {
		t.Fatal(err)
	}
	l := memory.Limits{Exchanges: 5, Notes: 4, TextLen: 100}
	store, err := memory.Open(ctx, env.JS, l)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w, err := memory.NewWriter(store, reg, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	handle := func(evt events.DomainEvent) {
		raw, _ := json.Marshal(evt)
		if _, err := w.Handle(runtime.NewMessage("x", evt.EventID, raw)); err != nil {
			t.Fatalf("event %s: %v", evt.EventID, err)
		}
	}
	long := strings.Repeat("a long, long line ", 26) // 468 bytes
	for n := range 40 {                              // one pair talks on and on
		handle(dialogue("npc:mira", "player:ada", n, long, long))
	}
	const npcs, players = 20, 20
	for i := range npcs {
		for j := range players {
			handle(dialogue(fmt.Sprintf("npc:n%02d", i), fmt.Sprintf("player:p%02d", j), 1, "Hello there.", "Well met, traveller."))
		}
	}
	d, err := store.Dialogue(ctx, "npc:mira", "player:ada")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Exchanges) != 5 || d.Exchanges[4].EventID != dialogue("npc:mira", "player:ada", 39, "", "x").EventID {
		t.Fatalf("the chatty pair kept %d exchanges (last %+v), want the newest 5", len(d.Exchanges), d.Exchanges[len(d.Exchanges)-1].EventID)
	}
	for _, x := range d.Exchanges {
		if len(x.NPCLine) > l.TextLen || len(x.PlayerSaid) > l.TextLen {
			t.Fatalf("a kept text of %d bytes", len(x.NPCLine))
		}
	}
	for i := range npcs {
		s, err := store.Summary(ctx, fmt.Sprintf("npc:n%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Notes) > 4 {
			t.Fatalf("npc n%02d keeps %d notes, want at most 4", i, len(s.Notes))
		}
	}
	kv := env.KeyValue(t, natsx.BucketMemory)
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recorded := metricstest.Sum(t, reg, "worldgate_memory_events_total", map[string]string{"outcome": memory.OutcomeRecorded})
	full := metricstest.Sum(t, reg, "worldgate_memory_events_total", map[string]string{"outcome": memory.OutcomeFull})
	t.Logf("bucket %d bytes of %d; %v events recorded, %v dropped (bucket full)", st.Bytes(), maxBytes, recorded, full)
	if st.Bytes() > maxBytes {
		t.Fatalf("the bucket holds %d bytes, over its %d", st.Bytes(), maxBytes)
	}
	if full == 0 || recorded == 0 || recorded+full != 40+npcs*players {
		t.Fatalf("recorded %v, dropped %v of %d events", recorded, full, 40+npcs*players)
	}
}
