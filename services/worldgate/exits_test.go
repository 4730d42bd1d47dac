package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/approval"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// World-rules caches list-exits answers per location, and a committed exit change is seen by
// the very next move: on the dev stack (demo world, Ana at the Ash Gate) a move through exit
// A commits; exit B is added and a move through it commits at once (never refused by a
// cached answer); A is removed and a move through it is refused by world-rules itself (the
// committed removal dropped the cached answer). Moves from a location whose exits did not
// change are answered from the cache.
func TestCommittedExitChangesReachTheNextMove(t *testing.T) {
	dir := t.TempDir()
	st, err := startStack(context.Background(), devFlags{dataDir: dir, host: "127.0.0.1", noDemo: true, approvers: []string{"alice"}}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, pubJS, err := st.ConnectAs(natsauth.Publisher)
	if err != nil {
		t.Fatal(err)
	}
	_, opJS, err := st.ConnectAs(natsauth.Operator)
	if err != nil {
		t.Fatal(err)
	}
	_, aliceJS, err := st.ConnectAs(natsauth.ApproverRole("alice"))
	if err != nil {
		t.Fatal(err)
	}
	move := func(from, dir string) *events.Outcome {
		t.Helper()
		env := envelope(t, events.PlayerMoveRequested, "player:ana", events.PlayerMoveRequestedPayload{
			PlayerID: "player:ana", FromLocationID: from, Direction: dir})
		got, err := events.Await(ctx, pubJS, env)
		if err != nil {
			t.Fatalf("move %s from %s: %v", dir, from, err)
		}
		return got[0]
	}
	mustMove := func(from, dir, to string) {
		t.Helper()
		o := move(from, dir)
		if o.Kind != events.OutcomeCommitted || o.Event == nil || !strings.Contains(string(o.Event.Payload), `"toLocationId":"`+to+`"`) {
			t.Fatalf("move %s from %s: %s %+v, want committed to %s", dir, from, o.Kind, o.Refusal, to)
		}
	}
	// worldBuild proposes p as the operator (approved by alice when it is held) and waits
	// for its commit.
	worldBuild := func(id, kind, payload string) {
		t.Helper()
		p := proposalOf(t, id, kind, "operator", events.Actor{Kind: "operator", ID: "ops"}, payload)
		w, err := events.Watch(ctx, st.JS, events.WatchOptions{FromStart: true, CorrelationIDs: []string{p.CorrelationID}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := publishAs(opJS, events.EmitSubject(events.EmitterOperator), p.ProposalID, mustJSON(t, p)); err != nil {
			t.Fatal(err)
		}
		if p.RequiresApproval {
			approve(t, aliceJS, p.ProposalID)
		}
		d, err := w.Next(ctx)
		if err != nil || d.Outcome.Kind != events.OutcomeCommitted {
			t.Fatalf("%s: %v %+v", id, err, d.Outcome)
		}
	}

	mustMove("loc:ash-gate", "north", "loc:market") // A
	mustMove("loc:market", "south", "loc:ash-gate")
	worldBuild("exits-cache-add-b", events.KindExitAdded, `{"fromLocationId":"loc:ash-gate","toLocationId":"loc:tavern","direction":"west","description":"A gap in the wall."}`)
	mustMove("loc:ash-gate", "west", "loc:tavern") // B, right after its commit
	mustMove("loc:tavern", "east", "loc:market")
	mustMove("loc:market", "south", "loc:ash-gate")
	mustMove("loc:ash-gate", "north", "loc:market")
	mustMove("loc:market", "south", "loc:ash-gate")
	worldBuild("exits-cache-remove-a", events.KindExitRemoved, `{"fromLocationId":"loc:ash-gate","direction":"north","reason":"the road collapsed"}`)
	// The removal reaches world-rules' cache through its watch on COMMITTED, a moment after the
	// commit: until then the cached answer still lists the exit and the invariant gate refuses
	// the move against the graph (harmless, agent.ExitsCache says why). Once it has, world-rules
	// refuses the move itself, without proposing it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		o := move("loc:ash-gate", "north")
		if o.Kind != events.OutcomeRefused || o.Refusal == nil || !strings.Contains(o.Refusal.Reason, "no exit north") {
			t.Fatalf("move through the removed exit: %s %+v; want it refused (no exit north)", o.Kind, o.Refusal)
		}
		if o.Refusal.Code == events.CodeMoveRefused {
			break
		}
		if o.Refusal.Code != events.CodeInvariantViolation || time.Now().After(deadline) {
			t.Fatalf("move through the removed exit: %+v; want world-rules' refusal (no exit north) once the removal reached its cache", o.Refusal)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The market's exits never changed: its second and third lookups were cache hits.
	hits, misses := metricstest.Sum(t, st.Reg, "worldgate_ai_exits_cache_hits_total", nil), metricstest.Sum(t, st.Reg, "worldgate_ai_exits_cache_misses_total", nil)
	calls := metricstest.Sum(t, st.Reg, "worldgate_mcp_tool_calls_total", map[string]string{"tool": "list-exits"})
	t.Logf("exits cache: %v hits, %v misses; mcp-world list-exits calls: %v for 8 moves", hits, misses, calls)
	if hits < 2 || calls >= 8 {
		t.Fatalf("the exits cache served %v of 8 moves (%v list-exits calls); want at least the market's repeated lookups", hits, calls)
	}
}

// approve decides the held proposal id as the approver of js, once it is held.
func approve(t *testing.T, js jetstream.JetStream, id string) {
	t.Helper()
	store, err := approval.Open(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 30*time.Second, id+" held", func() bool {
		r, err := store.Show(context.Background(), id)
		return err == nil && r.Status == approval.StatusPending
	})
	if err := store.Request(context.Background(), approval.Decision{ProposalID: id, Status: approval.StatusApproved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
}
