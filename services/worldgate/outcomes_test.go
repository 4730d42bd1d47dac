package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// startQuietStack starts `worldgate dev`'s stack without the demo scenario (the demo world is
// loaded) on free ports, logging into the test's directory.
func startQuietStack(t *testing.T) *stack {
	t.Helper()
	dir := t.TempDir()
	logOut, err := os.Create(filepath.Join(dir, "worldgate.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logOut.Close() })
	st, err := startStack(context.Background(), devFlags{dataDir: dir, host: "127.0.0.1", noDemo: true}, logx.New(logOut, "worldgate-dev", "info"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.stop)
	return st
}

func envelope(t *testing.T, typ, player string, payload any) *events.Envelope {
	t.Helper()
	env, err := events.NewEnvelope(typ, "test/outcomes", events.Actor{Kind: "player", ID: player}, payload)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// A game backend, with nothing but the events module and the publisher's NATS user: Await gets
// the committed NPC line and a refused move with its reason; Watch, resumed from a cursor,
// delivers what came after it and nothing before.
func TestAwaitAndWatchOutcomesOnTheRealStack(t *testing.T) {
	st := startQuietStack(t)
	_, js, err := st.connectAs(natsauth.Publisher)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	talk := envelope(t, events.PlayerSpokeToNPC, "player:cass", events.PlayerSpokeToNPCPayload{
		PlayerID: "player:cass", NPCID: "npc:oren", LocationID: "loc:tavern", Utterance: "Any news from the mines?"})
	got, err := events.Await(ctx, js, talk)
	if err != nil {
		t.Fatal(err)
	}
	o := got[0]
	if o.EventID != talk.EventID || o.Kind == events.OutcomeRefused || o.Event == nil || o.Event.Type != "NPCDialogueAccepted" || o.Text() == "" {
		t.Fatalf("dialogue outcome: %+v", o)
	}
	if o.Journey == nil || len(o.Journey.Gates) == 0 || o.LocationID != "loc:tavern" {
		t.Fatalf("dialogue outcome lacks its journey or location: %+v", o)
	}

	w, err := events.Watch(ctx, js, events.WatchOptions{Actors: []string{"player:ana"}})
	if err != nil {
		t.Fatal(err)
	}
	refused := envelope(t, events.PlayerMoveRequested, "player:ana", events.PlayerMoveRequestedPayload{
		PlayerID: "player:ana", FromLocationID: "loc:ash-gate", Direction: "west"})
	got, err = events.Await(ctx, js, refused)
	if err != nil {
		t.Fatal(err)
	}
	if r := got[0]; r.Kind != events.OutcomeRefused || r.Refusal.Code != events.CodeMoveRefused || !strings.Contains(r.Refusal.Reason, "no exit west") {
		t.Fatalf("refused move: %+v %+v", r, r.Refusal)
	}
	moved := envelope(t, events.PlayerMoveRequested, "player:ana", events.PlayerMoveRequestedPayload{
		PlayerID: "player:ana", FromLocationID: "loc:ash-gate", Direction: "north"})
	if got, err = events.Await(ctx, js, moved); err != nil || got[0].Kind != events.OutcomeCommitted || got[0].Event.Type != "PlayerMoved" {
		t.Fatalf("accepted move: %v %+v", err, got)
	}

	// The watch (started before both) sees both, in order, and only ana's.
	first, err := w.Next(ctx)
	if err != nil || first.Outcome.EventID != refused.EventID {
		t.Fatalf("first watched outcome: %v %+v", err, first.Outcome)
	}
	second, err := w.Next(ctx)
	if err != nil || second.Outcome.EventID != moved.EventID || second.Cursor <= first.Cursor {
		t.Fatalf("second watched outcome: %v %+v", err, second)
	}
	w.Close()
	// Resumed from the first one's cursor: the second again, nothing before it.
	again, err := events.Watch(ctx, js, events.WatchOptions{After: first.Cursor, Actors: []string{"player:ana"}})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	d, err := again.Next(ctx)
	if err != nil || d.Outcome.OutcomeID != second.Outcome.OutcomeID {
		t.Fatalf("resumed watch delivered %+v (%v), want the move north", d.Outcome, err)
	}
	// Filters: by correlation id, from the start of the stream.
	byCorr, err := events.Watch(ctx, js, events.WatchOptions{FromStart: true, CorrelationIDs: []string{talk.CorrelationID}})
	if err != nil {
		t.Fatal(err)
	}
	defer byCorr.Close()
	if d, err := byCorr.Next(ctx); err != nil || d.Outcome.EventID != talk.EventID {
		t.Fatalf("watch by correlation id: %v %+v", err, d.Outcome)
	}

	// Nothing answers an event no agent handles in time: the error says what is pending.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	quest := envelope(t, events.QuestSeedRequested, "player:ana", events.QuestSeedRequestedPayload{LocationID: "loc:deep-mine"})
	_, err = events.Await(short, js, quest, events.AwaitRoles("quest-planner", "no-such-role"))
	var pending *events.PendingError
	if !errors.As(err, &pending) || !strings.Contains(err.Error(), "no-such-role") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("await past its deadline: %v", err)
	}
}
