// Package natstest starts a real embedded NATS JetStream server for tests, with Worldgate's
// topology provisioned.
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Env is a running server with a connected client.
type Env struct {
	Server *natsx.Embedded
	Dir    string
	Conn   *nats.Conn
	JS     jetstream.JetStream
}

// Start starts a server in a temporary directory, provisions the default topology and
// connects. Everything is stopped when the test ends.
func Start(t testing.TB) *Env {
	t.Helper()
	return StartIn(t, t.TempDir())
}

// StartIn is Start with a given data directory (to restart a server on the same data).
func StartIn(t testing.TB, dir string) *Env {
	t.Helper()
	srv, err := natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	nc, js, err := natsx.Connect(natsx.ConnConfig{URL: srv.ClientURL(), Name: t.Name()}, logx.Discard())
	if err != nil {
		srv.Shutdown()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := natsx.Provision(ctx, js, natsx.DefaultTopology(natsx.TopologyOptions{}), logx.Discard()); err != nil {
		nc.Close()
		srv.Shutdown()
		t.Fatal(err)
	}
	e := &Env{Server: srv, Dir: dir, Conn: nc, JS: js}
	t.Cleanup(e.Stop)
	return e
}

// Stop closes the client and shuts the server down; it is safe to call twice.
func (e *Env) Stop() {
	if e.Conn != nil {
		e.Conn.Close()
	}
	e.Server.Shutdown()
}

// KeyValue is the provisioned bucket's handle; the test fails when there is none.
func (e *Env) KeyValue(t testing.TB, bucket string) jetstream.KeyValue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := e.JS.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", bucket, err)
	}
	return kv
}

// WaitFor polls cond every 10ms until it is true or the deadline passes.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StreamMsgs returns how many messages stream holds on subject (">" or "" for all).
func StreamMsgs(t testing.TB, js jetstream.JetStream, stream, subject string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if subject == "" || subject == ">" {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// DieHolding plays a worker that died holding a message: it creates the durable consumer with
// cfg (a runtime.Consumer's ServerConfig, so that the worker finds it as it would configure it),
// fetches one message and never acknowledges it. It returns that message's data.
func DieHolding(t testing.TB, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) []byte {
	t.Helper()
	ctx := context.Background()
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	for m := range batch.Messages() {
		data = m.Data()
	}
	if data == nil {
		t.Fatalf("consumer %s on %s had no message to hold", cfg.Durable, stream)
	}
	return data
}
