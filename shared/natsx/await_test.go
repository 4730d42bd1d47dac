package natsx_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/slowtest"
)

// A worker that starts while its JetStream cluster has no quorum (two of three nodes restarting,
// a leader being elected) waits for it instead of exiting: outside testing saw the gate exit on
// its start-up deadline during a leader election. A missing bucket still fails at once.
func TestStartupWaitsOutALostQuorum(t *testing.T) {
	slowtest.Skip(t, "end-to-end (a three-node NATS cluster losing its quorum)")
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(0)
	ctx := context.Background()
	if err := natsx.Await(ctx, "test bucket", logx.Discard(), func(ctx context.Context) error {
		_, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "waits", Replicas: 3})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	c.Stop(1)
	c.Stop(2)
	// The situation is real: creating a bucket needs the quorum, and a plain request fails.
	create := func(ctx context.Context) error {
		_, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "later", Replicas: 3})
		return err
	}
	plain, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := create(plain)
	cancel()
	if err == nil {
		t.Fatal("one node of three created a replicated bucket: the test no longer reproduces a lost quorum")
	}
	t.Logf("without waiting: %v", err)

	back := time.AfterFunc(3*time.Second, func() { c.Start(1); c.Start(2) })
	defer back.Stop()
	var logs bytes.Buffer
	started := time.Now()
	if err := natsx.Await(ctx, "bucket later", slog.New(slog.NewTextHandler(&logs, nil)), create); err != nil {
		t.Fatalf("the request did not wait for the quorum to come back: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "JetStream did not answer yet") {
		t.Fatalf("the wait was not logged:\n%s", logs.String())
	}
	t.Logf("answered after %s", time.Since(started).Round(time.Millisecond))
	kv, err := natsx.AwaitKeyValue(ctx, js, "later", logx.Discard())
	if err != nil || kv.Bucket() != "later" {
		t.Fatalf("lookup after the quorum came back: %v", err)
	}

	started = time.Now()
	_, err = natsx.AwaitKeyValue(ctx, js, "never-provisioned", logx.Discard())
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("a missing bucket: got %v, want ErrBucketNotFound", err)
	}
	if d := time.Since(started); d > 3*time.Second {
		t.Fatalf("a missing bucket took %s to be refused: it should not be waited for", d)
	}
}
