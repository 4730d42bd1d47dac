package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// startQuietStack starts `worldgate dev`'s stack without the demo scenario (the demo world is
// loaded) on free ports, logging into the test's directory.
// startDemoStack starts a dev stack, runs the demo on it and waits until the pipeline is idle;
// the stack stops when the test ends.
func startDemoStack(ctx context.Context, t testing.TB) *devStack {
	t.Helper()
	st, err := startStack(ctx, devFlags{dataDir: t.TempDir(), host: "127.0.0.1", jsonOut: true, idleTimeout: 2 * time.Minute}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.stop)
	if _, err := st.runDemo(ctx); err != nil {
		t.Fatalf("demo: %v", err)
	}
	if err := st.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

func startQuietStack(t testing.TB) *devStack {
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

func envelope(t testing.TB, typ, player string, payload any) *events.Envelope {
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
	_, js, err := st.ConnectAs(natsauth.Publisher)
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

// A client that speaks only HTTP: it publishes through edge and receives the committed NPC
// line over SSE, and by long poll.
func TestEdgePublishOverHTTPReceiveOverSSE(t *testing.T) {
	st := startQuietStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", st.EdgeURL+"/v1/outcomes?actor=player:cass", nil)
	req.Header.Set("Authorization", "Bearer "+st.EdgeKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("SSE: %v %v", err, resp)
	}
	defer resp.Body.Close()
	next, stop := iter.Pull2(iter.Seq2[sse.Event, error](sse.Read(resp.Body, nil)))
	defer stop()

	env := envelope(t, events.PlayerSpokeToNPC, "player:cass", events.PlayerSpokeToNPCPayload{
		PlayerID: "player:cass", NPCID: "npc:oren", LocationID: "loc:tavern", Utterance: "Any news from the mines?"})
	body, _ := json.Marshal(env)
	post, _ := http.NewRequestWithContext(ctx, "POST", st.EdgeURL+"/v1/events", bytes.NewReader(body))
	post.Header.Set("Authorization", "Bearer "+st.EdgeKey)
	post.Header.Set("Content-Type", "application/json")
	post.Header.Set("Idempotency-Key", env.IdempotencyKey)
	pr, err := http.DefaultClient.Do(post)
	if err != nil || pr.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/events: %v %v", err, pr)
	}
	pr.Body.Close()
	for {
		ev, err, ok := next()
		if !ok || err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		o, err := events.DecodeOutcome([]byte(ev.Data))
		if err != nil {
			t.Fatal(err)
		}
		if o.EventID != env.EventID {
			continue
		}
		if o.Kind == events.OutcomeRefused || o.Event.Type != "NPCDialogueAccepted" || o.Text() == "" || ev.LastEventID == "" {
			t.Fatalf("outcome over SSE: %+v", o)
		}
		break
	}
	lp, _ := http.NewRequestWithContext(ctx, "GET", st.EdgeURL+"/v1/events/"+env.EventID+"/outcome?wait=30", nil)
	lp.Header.Set("Authorization", "Bearer "+st.EdgeKey)
	lr, err := http.DefaultClient.Do(lp)
	if err != nil || lr.StatusCode != 200 {
		t.Fatalf("long poll: %v %v", err, lr)
	}
	defer lr.Body.Close()
	var out struct{ Outcomes []*events.Outcome }
	if err := json.NewDecoder(lr.Body).Decode(&out); err != nil || out.Outcomes[0].Event.Type != "NPCDialogueAccepted" {
		t.Fatalf("long poll outcome: %v %+v", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(st.f.dataDir, "endpoints.json"))
	if err != nil || !strings.Contains(string(raw), `"edge.key"`) || !strings.Contains(string(raw), `"edge.url"`) {
		t.Fatalf("endpoints.json lacks edge: %s", raw)
	}
	if fi, _ := os.Stat(filepath.Join(st.f.dataDir, "endpoints.json")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("endpoints.json mode %v", fi.Mode())
	}
}

// Every event gets an outcome, the events a role decides not to act on too (issue 40 item 3): a
// Player.Moved into a place whose ambience is still fresh gets a skipped outcome within seconds,
// with the reason and when to ask again, through events.Await and through edge's long poll;
// an event id never published is unknown (404), not pending for ever.
func TestSkippedAndUnknownEventsAreAnswered(t *testing.T) {
	st := startQuietStack(t)
	_, js, err := st.ConnectAs(natsauth.Publisher)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	arrive := func() *events.Envelope {
		return envelope(t, events.PlayerMoved, "player:cass", events.PlayerMovedPayload{
			PlayerID: "player:cass", FromLocationID: "loc:ash-gate", ToLocationID: "loc:tavern", Direction: "east"})
	}
	// The first arrival gets the tavern its ambience.
	got, err := events.Await(ctx, js, arrive())
	if err != nil || got[0].Event == nil || got[0].Event.Type != "AmbienceGenerated" {
		t.Fatalf("first arrival: %v %+v", err, got)
	}
	// The next, while it is fresh, is skipped — and says so within seconds.
	began := time.Now()
	soon, cancelSoon := context.WithTimeout(ctx, 15*time.Second)
	defer cancelSoon()
	got, err = events.Await(soon, js, arrive())
	if err != nil {
		t.Fatalf("second arrival: %v", err)
	}
	o := got[0]
	if o.Kind != events.OutcomeSkipped || o.Skip == nil || o.Skip.Code != events.CodeAmbienceFresh || o.AgentRole != "ambience" ||
		!strings.Contains(o.Skip.Reason, "loc:tavern has ambience committed") || o.Skip.RetryAfter <= 0 || o.Skip.RetryAtUTC == nil {
		t.Fatalf("second arrival: %+v %+v; want skipped AMBIENCE_FRESH with when to ask again", o, o.Skip)
	}
	t.Logf("skipped after %s: %s", time.Since(began).Round(time.Millisecond), o.Skip.Reason)

	// Over HTTP: publish through edge, long-poll the skip.
	longPoll := func(id string) *http.Response {
		t.Helper()
		lp, _ := http.NewRequestWithContext(ctx, "GET", st.EdgeURL+"/v1/events/"+id+"/outcome?wait=15", nil)
		lp.Header.Set("Authorization", "Bearer "+st.EdgeKey)
		lr, err := http.DefaultClient.Do(lp)
		if err != nil {
			t.Fatal(err)
		}
		return lr
	}
	env := arrive()
	body, _ := json.Marshal(env)
	post, _ := http.NewRequestWithContext(ctx, "POST", st.EdgeURL+"/v1/events", bytes.NewReader(body))
	post.Header.Set("Authorization", "Bearer "+st.EdgeKey)
	post.Header.Set("Content-Type", "application/json")
	pr, err := http.DefaultClient.Do(post)
	if err != nil || pr.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/events: %v %v", err, pr)
	}
	pr.Body.Close()
	lr := longPoll(env.EventID)
	var out struct{ Outcomes []*events.Outcome }
	if err := json.NewDecoder(lr.Body).Decode(&out); err != nil || lr.StatusCode != 200 || out.Outcomes[0].Kind != events.OutcomeSkipped ||
		out.Outcomes[0].Skip == nil || out.Outcomes[0].Skip.Reason == "" {
		t.Fatalf("long poll of a skipped arrival: %d %v %+v", lr.StatusCode, err, out)
	}
	lr.Body.Close()

	// An event never published: 404 at once, with a sentence, not 204 for ever.
	never := arrive()
	began = time.Now()
	lr = longPoll(never.EventID)
	defer lr.Body.Close()
	var problem struct {
		Status int
		Detail string
	}
	if err := json.NewDecoder(lr.Body).Decode(&problem); err != nil || lr.StatusCode != 404 || !strings.Contains(problem.Detail, "never published") ||
		time.Since(began) > 10*time.Second {
		t.Fatalf("long poll of an unknown event: %d %v %+v after %s", lr.StatusCode, err, problem, time.Since(began))
	}
}
