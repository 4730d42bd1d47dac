package natsx_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Publishing a world event: build an envelope (events.NewEnvelope) and publish it with
// events.Publish, which validates it as Worldgate will read it and sets Nats-Msg-Id to its
// idempotency key, so a retried publish is stored once. Here on a real, embedded NATS server
// with Worldgate's topology provisioned.
func Example_publishEnvelope() {
	dir, _ := os.MkdirTemp("", "natsx-example-")
	defer os.RemoveAll(dir)
	log := slog.New(slog.DiscardHandler)
	srv, err := natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: dir, Logger: log})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	nc, js, err := natsx.Connect(natsx.ConnConfig{URL: srv.ClientURL(), Name: "example"}, log)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := natsx.Provision(ctx, js, natsx.DefaultTopology(natsx.TopologyOptions{}), log); err != nil {
		fmt.Println(err)
		return
	}

	env, err := events.NewEnvelope(events.PlayerMoveRequested, "example-client",
		events.Actor{Kind: "player", ID: "player:ada"},
		events.PlayerMoveRequestedPayload{PlayerID: "player:ada", FromLocationID: "loc:ash-gate", Direction: "north"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 { // a retry after a lost acknowledgement: the same idempotency key
		ack, err := events.Publish(ctx, js, env)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ack.Stream, ack.Sequence, "duplicate:", ack.Duplicate)
	}

	// An envelope Worldgate would refuse is refused here, before it is sent.
	env.Payload = []byte(`{"playerId":"player:ada","direction":"north"}`)
	_, err = events.Publish(ctx, js, env)
	fmt.Println(err)
	// Output:
	// WORLD 1 duplicate: false
	// WORLD 1 duplicate: true
	// invalid envelope: /payload/fromLocationId: required field is missing: add it
}
