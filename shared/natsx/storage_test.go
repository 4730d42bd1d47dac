package natsx_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/logx/logxtest"
	"github.com/worldgate/worldgate/shared/natsx"
)

// provision starts an embedded server with cfg, connects and provisions the default topology.
func provision(t *testing.T, cfg natsx.EmbeddedConfig) (jetstream.JetStream, error) {
	t.Helper()
	srv, err := natsx.StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, js, err := natsx.Connect(natsx.ConnConfig{URL: srv.ClientURL(), Name: t.Name()}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return js, natsx.Provision(ctx, js, natsx.DefaultTopology(natsx.TopologyOptions{}), logx.Discard())
}

// A development or test machine whose disk has less free space than the topology's size limits
// add up to (CI did: "create bucket worldgate-approvals: insufficient storage resources
// available") still provisions, and a stream without a size limit still finds room after it
// (bench's ceiling did not when the store limit was the topology's total): little of it is ever
// written there. It is told so.
func TestEmbeddedProvisionsOnADiskShortOfTheTopology(t *testing.T) {
	need := natsx.DefaultTopology(natsx.TopologyOptions{}).StoreBytes()
	if need < 1<<30 {
		t.Fatalf("the default topology holds %d bytes; the test wants more than the 1 GiB it stands in as free", need)
	}
	natsx.SetFreeDisk(t, func(string) int64 { return 1 << 30 })
	var logs logxtest.Buffer
	js, err := provision(t, natsx.EmbeddedConfig{StoreDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("provisioning on a disk with 1 GiB free: %v", err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "UNLIMITED", Subjects: []string{"unlimited"}}); err != nil {
		t.Errorf("a stream without a size limit after the topology: %v", err)
	}
	if !strings.Contains(logs.String(), "less free space than the JetStream topology may hold") {
		t.Errorf("no warning about the disk; logs:\n%s", logs.String())
	}
}

// A disk with room is not warned about.
func TestEmbeddedWarnsOnlyWhenTheDiskIsShort(t *testing.T) {
	natsx.SetFreeDisk(t, func(string) int64 { return 1 << 50 })
	var logs logxtest.Buffer
	if _, err := provision(t, natsx.EmbeddedConfig{StoreDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "less free space") {
		t.Errorf("warned about the disk though it has room:\n%s", logs.String())
	}
}

// A server whose store limit is smaller than the topology refuses it; provisioning says what to
// change, and the refusal is permanent: a worker does not wait two minutes for it (CI's
// TestProvisionAsAdmin did).
func TestProvisionSaysWhenTheServerHasNoRoomForTheTopology(t *testing.T) {
	_, err := provision(t, natsx.EmbeddedConfig{StoreDir: t.TempDir(), MaxStore: 1 << 30})
	if err == nil {
		t.Fatal("a 1 GiB store took the whole topology")
	}
	for _, want := range []string{"insufficient storage", "max_file_store", "-retention"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if !natsx.Permanent(err) {
		t.Errorf("the refusal is retried as if waiting could cure it: %v", err)
	}
}
