package natsx_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

func envelope(t *testing.T) *events.Envelope {
	t.Helper()
	env, err := events.NewEnvelope(events.PlayerMoved, "test", events.Actor{Kind: "player", ID: "player:ada"},
		events.PlayerMovedPayload{PlayerID: "player:ada", FromLocationID: "loc:gate", ToLocationID: "loc:square", Direction: "north"})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestPublishSameIdempotencyKeyLandsOnce(t *testing.T) {
	e := natstest.Start(t)
	ctx := context.Background()
	env := envelope(t)
	first, err := events.Publish(ctx, e.JS, env)
	if err != nil {
		t.Fatal(err)
	}
	again := *env
	again.EventID = envelope(t).EventID // a retrying publisher may even mint a new event id
	second, err := events.Publish(ctx, e.JS, &again)
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !second.Duplicate || first.Sequence != second.Sequence {
		t.Fatalf("want the second publish flagged duplicate of seq %d, got %+v then %+v", first.Sequence, first, second)
	}
	if n := natstest.StreamMsgs(t, e.JS, events.StreamWorld, ""); n != 1 {
		t.Fatalf("WORLD holds %d messages, want 1", n)
	}
}

func TestPublishRefusesInvalidEnvelope(t *testing.T) {
	e := natstest.Start(t)
	env := envelope(t)
	env.SpecVersion = "0.9"
	if _, err := events.Publish(context.Background(), e.JS, env); !events.Has(err, events.ProblemSpecVersion) {
		t.Fatalf("want a spec version problem, got %v", err)
	}
	if n := natstest.StreamMsgs(t, e.JS, events.StreamWorld, ""); n != 0 {
		t.Fatalf("an invalid envelope reached WORLD (%d messages)", n)
	}
}

func TestRestartKeepsAcknowledgedMessages(t *testing.T) {
	dir := t.TempDir()
	e := natstest.StartIn(t, dir)
	const n = 200
	for i := 0; i < n; i++ {
		if _, err := events.Publish(context.Background(), e.JS, envelope(t)); err != nil {
			t.Fatal(err)
		}
	}
	e.Stop()
	e2 := natstest.StartIn(t, dir)
	if got := natstest.StreamMsgs(t, e2.JS, events.StreamWorld, ""); got != n {
		t.Fatalf("after restart WORLD holds %d messages, want %d", got, n)
	}
}

func TestProvisionIsIdempotentAndApplesChanges(t *testing.T) {
	e := natstest.Start(t)
	ctx := context.Background()
	topo := natsx.DefaultTopology(natsx.TopologyOptions{})
	if err := natsx.Provision(ctx, e.JS, topo, logx.Discard()); err != nil {
		t.Fatalf("second provisioning of the same topology: %v", err)
	}
	changed := natsx.DefaultTopology(natsx.TopologyOptions{DedupTTL: 2 * time.Hour, Limits: map[string]natsx.Limits{
		events.StreamWorld: {MaxAge: 48 * time.Hour, MaxBytes: 1 << 30}, natsx.BucketApprovals: {MaxBytes: 1 << 20}}})
	if err := natsx.Provision(ctx, e.JS, changed, logx.Discard()); err != nil {
		t.Fatal(err)
	}
	s, _ := e.JS.Stream(ctx, events.StreamWorld)
	if got := s.CachedInfo().Config; got.MaxAge != 48*time.Hour || got.MaxBytes != 1<<30 {
		t.Fatalf("WORLD max age %s, max bytes %d after update, want 48h and 1 GiB", got.MaxAge, got.MaxBytes)
	}
	approvals := e.KeyValue(t, natsx.BucketApprovals)
	ast, _ := approvals.Status(ctx)
	if got := ast.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.MaxBytes; got != 1<<20 || ast.TTL() != natsx.DefaultLimits[natsx.BucketApprovals].MaxAge {
		t.Fatalf("approvals max bytes %d, TTL %s after update", got, ast.TTL())
	}
	kv := e.KeyValue(t, natsx.BucketDedup)
	st, _ := kv.Status(ctx)
	if st.TTL() != 2*time.Hour {
		t.Fatalf("dedup TTL %s after update, want 2h", st.TTL())
	}
	bad := natsx.DefaultTopology(natsx.TopologyOptions{})
	bad.Streams[0].Storage = jetstream.MemoryStorage
	err := natsx.Provision(ctx, e.JS, bad, logx.Discard())
	if err == nil || !strings.Contains(err.Error(), "WORLD") || !strings.Contains(err.Error(), "Storage") {
		t.Fatalf("want an error naming WORLD and Storage, got %v", err)
	}
}

func BenchmarkPublishWorld(b *testing.B) {
	e := natstest.Start(b)
	env := envelope(&testing.T{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		env.IdempotencyKey = "bench-" + strconv.Itoa(i)
		i++
		if _, err := events.Publish(context.Background(), e.JS, env); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkPublishWorldAsync is the pipelined publish rate of pre-encoded envelopes.
func BenchmarkPublishWorldAsync(b *testing.B) {
	e := natstest.Start(b)
	data, _ := json.Marshal(envelope(&testing.T{}))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := e.JS.PublishAsync(events.Subject(events.PlayerMoved), data, jetstream.WithMsgID("a-"+strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
		i++
	}
	<-e.JS.PublishAsyncComplete()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// Every stream, COMMITTED included, gets the configured duplicate window rather than the
// server's 2-minute default.
func TestEveryStreamHasTheDuplicateWindow(t *testing.T) {
	e := natstest.Start(t)
	for _, name := range []string{events.StreamWorld, events.StreamProposals, events.StreamCommitted, events.StreamAudit, events.StreamDLQ, events.StreamOutcomes} {
		s, err := e.JS.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Duplicates; got != 10*time.Minute {
			t.Errorf("%s duplicate window %s, want 10m", name, got)
		}
	}
}
