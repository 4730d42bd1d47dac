package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/worldgate/worldgate/events"
)

// A proposal kind is defined once (events.KindInfo): its payload type says what the gates
// read of it: the text people read (safety, dedup), what it is about, the entities it needs.
func ExampleDecodePayload() {
	raw := json.RawMessage(`{"npcId":"npc:brannoc","playerId":"player:ada","locationId":"loc:tavern","line":"The mill burned last night.","intent":"inform"}`)
	p, err := events.DecodePayload(events.KindNPCDialogue, raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Content())
	fmt.Println(p.Target(), p.References())
	_, err = events.DecodePayload(events.KindNPCDialogue, json.RawMessage(`{"npcId":"npc:brannoc","tone":"gruff"}`))
	fmt.Println(err)
	// Output:
	// The mill burned last night.
	// npc:brannoc|player:ada [npc:brannoc player:ada loc:tavern]
	// npc_dialogue payload: json: unknown field "tone"
}

// A game backend connects as `worldgate dev`'s publisher (endpoints.json holds the NATS URL and
// the credentials; Connect sets the inbox prefix the permissions require) and publishes one
// event. Run `worldgate dev` first.
func ExamplePublish() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, closeNATS, err := events.Connect(ctx, events.ConnectOptions{Endpoints: ".worldgate/endpoints.json", Role: "publisher"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeNATS()
	env, err := events.NewEnvelope(events.PlayerMoved, "game-backend/eu-1",
		events.Actor{Kind: "player", ID: "player:ana"}, // the demo world's player, at the Ash Gate
		events.PlayerMovedPayload{PlayerID: "player:ana", FromLocationID: "loc:ash-gate", ToLocationID: "loc:market", Direction: "north"})
	if err != nil {
		fmt.Println(err)
		return
	}
	// A retrying publisher keeps env.IdempotencyKey the same across attempts.
	ack, err := events.Publish(ctx, js, env)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("stored at", ack.Stream, ack.Sequence, "duplicate:", ack.Duplicate)
}

// Await publishes an event and waits for its final outcome: committed, fallback, refused or
// skipped.
func ExampleAwait() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, closeNATS, err := events.Connect(ctx, events.ConnectOptions{Endpoints: ".worldgate/endpoints.json"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeNATS()
	env, err := events.NewEnvelope(events.PlayerSpokeToNPC, "game-backend/eu-1",
		events.Actor{Kind: "player", ID: "player:cass"}, // the demo world: Cass in the tavern, Oren behind its bar
		events.PlayerSpokeToNPCPayload{PlayerID: "player:cass", NPCID: "npc:oren", LocationID: "loc:tavern", Utterance: "Any news?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	outs, err := events.Await(ctx, js, env)
	if err != nil {
		fmt.Println(err) // an *events.PendingError when ctx ends first
		return
	}
	for _, o := range outs {
		switch o.Kind {
		case events.OutcomeCommitted, events.OutcomeFallback:
			fmt.Println(o.Actor.ID, o.Text())
		case events.OutcomeRefused:
			fmt.Println(o.Actor.ID, "refused:", o.Refusal.Reason)
		case events.OutcomeSkipped:
			fmt.Println(o.Actor.ID, "skipped:", o.Skip.Reason)
		}
	}
}

// Watch follows the outcomes of one player, resuming after a saved cursor.
func ExampleWatch() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, closeNATS, err := events.Connect(ctx, events.ConnectOptions{Endpoints: ".worldgate/endpoints.json"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeNATS()
	var savedCursor uint64 // 0: from now on
	w, err := events.Watch(ctx, js, events.WatchOptions{After: savedCursor, Actors: []string{"player:cass"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	for {
		d, err := w.Next(ctx)
		var undecodable *events.UndecodableError
		if errors.As(err, &undecodable) {
			continue // a newer format, say: skip it
		}
		if err != nil {
			fmt.Println("stopped; the next Watch resumes after", savedCursor) // ctx ended
			return
		}
		fmt.Println(d.Outcome.Kind, d.Outcome.Text()) // de-duplicate on d.Outcome.OutcomeID (at-least-once)
		savedCursor = d.Cursor
	}
}
