package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// A handler is a plain function from a message to the messages it publishes. The App around it
// acknowledges the input only once JetStream has acknowledged every output, retries a failing
// message with backoff, and dead-letters it (deadletter.<handler>, with the reason) once it is
// permanent or out of deliveries. Here on a real, embedded NATS server.
func Example_handler() {
	dir, _ := os.MkdirTemp("", "runtime-example-")
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
	// The dead-letter stream comes with Worldgate's topology; the example's own stream beside it.
	if err := natsx.Provision(ctx, js, natsx.DefaultTopology(natsx.TopologyOptions{}), log); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "GREETINGS", Subjects: []string{"greetings.>"}}); err != nil {
		fmt.Println(err)
		return
	}

	app, err := runtime.New(runtime.Options{Name: "shouter", Conn: nc, JetStream: js, Registerer: metrics.NewRegistry(), Logger: log})
	if err != nil {
		fmt.Println(err)
		return
	}
	app.Handle("shout", runtime.Consumer{Stream: "GREETINGS", Subjects: []string{"greetings.in"}},
		func(m *message.Message) ([]*message.Message, error) {
			text := string(m.Payload)
			if text == "" {
				return nil, runtime.Permanentf("an empty greeting cannot be shouted") // no retry: a dead letter
			}
			return []*message.Message{runtime.NewMessage("greetings.out", "shout:"+m.UUID, []byte(strings.ToUpper(text)))}, nil
		})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()

	pub := runtime.NewPublisher(js, 0)
	for id, text := range map[string]string{"g1": "well met", "g2": ""} {
		if err := pub.PublishContext(ctx, "greetings.in", runtime.NewMessage("greetings.in", id, []byte(text))); err != nil {
			fmt.Println(err)
			return
		}
	}
	out := waitLast(ctx, js, "GREETINGS", "greetings.out")
	dl := waitLast(ctx, js, events.StreamDLQ, events.DeadLetterSubject("shout"))
	stop()
	if err := <-done; err != nil {
		fmt.Println(err)
	}
	fmt.Println(string(out.Data))
	fmt.Println(dl.Header.Get(events.HeaderDLQReason))
	// Output:
	// WELL MET
	// an empty greeting cannot be shouted
}

// waitLast waits for the last message on subject.
func waitLast(ctx context.Context, js jetstream.JetStream, stream, subject string) *jetstream.RawStreamMsg {
	for {
		s, err := js.Stream(ctx, stream)
		if err == nil {
			if m, err := s.GetLastMsgForSubject(ctx, subject); err == nil {
				return m
			} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
				panic(err)
			}
		}
		select {
		case <-ctx.Done():
			panic(fmt.Sprintf("no message on %s: %v", subject, ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
