package natsx_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// The limits of every stream and bucket agree with each other and with the server, for the
// default topology and for operators' settings at their edges: whatever a stream accepts can
// be dead-lettered, duplicate windows fit in what streams keep.
func TestTopologyLimitsAgree(t *testing.T) {
	for _, opts := range []natsx.TopologyOptions{
		{},
		{Replicas: 3, MaxMsgSize: 8 << 20, DuplicateWindow: time.Hour, Limits: map[string]natsx.Limits{events.StreamWorld: {MaxAge: 30 * time.Minute}}},
		{MaxMsgSize: 16 << 10, DuplicateWindow: 2 * time.Minute},
	} {
		topo := natsx.DefaultTopology(opts)
		if err := natsx.CheckLimits(topo, natsx.ServerMaxPayload); err != nil {
			t.Errorf("options %+v:\n%v", opts, err)
		}
	}
	// The check fails where it must.
	bad := natsx.DefaultTopology(natsx.TopologyOptions{})
	for i := range bad.Streams {
		if bad.Streams[i].Name == events.StreamDLQ {
			bad.Streams[i].MaxMsgSize = 1 << 10
		}
		if bad.Streams[i].Name == events.StreamWorld {
			bad.Streams[i].MaxMsgSize = 16 << 20
		}
	}
	err := natsx.CheckLimits(bad, natsx.ServerMaxPayload)
	if err == nil || !strings.Contains(err.Error(), "DLQ accepts 1024 bytes") || !strings.Contains(err.Error(), "stream WORLD accepts 16777216-byte") {
		t.Fatalf("a DLQ smaller than a dead letter and a stream over the max payload: %v", err)
	}
}

func TestCheckConsumerRefusesUnboundedDelivery(t *testing.T) {
	ok := jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: 8, MaxAckPending: 512}
	if err := natsx.CheckConsumer(ok); err != nil {
		t.Fatal(err)
	}
	for _, md := range []int{-1, 0, natsx.DeadLetterAttempts, natsx.MaxDeliverBound + 1} {
		c := ok
		c.MaxDeliver = md
		if err := natsx.CheckConsumer(c); err == nil || !strings.Contains(err.Error(), "MaxDeliver") {
			t.Errorf("MaxDeliver %d: %v", md, err)
		}
	}
}

// WORLD takes the subjects of known event types only: a publish to any other subject is
// refused at once. A WORLD provisioned before (world.events.>) is narrowed in place, and the
// messages it still holds on other subjects are reported with the command that removes them.
func TestWorldTakesKnownEventTypesOnly(t *testing.T) {
	e := natstest.Start(t)
	ctx := context.Background()
	s, err := e.JS.Stream(ctx, events.StreamWorld)
	if err != nil {
		t.Fatal(err)
	}
	old := s.CachedInfo().Config
	old.Subjects = []string{events.SubjectWorldAll}
	if _, err := e.JS.UpdateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := e.JS.Publish(ctx, "world.events.zzz", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	if err := natsx.Provision(ctx, e.JS, natsx.DefaultTopology(natsx.TopologyOptions{}), log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), `"subject":"world.events.zzz","messages":1`) || !strings.Contains(logged.String(), "nats stream purge WORLD --subject world.events.zzz") {
		t.Errorf("the stray message was not reported:\n%s", logged.String())
	}
	for _, subject := range []string{"world.events.zzz", "world.events.player.spoketonpc.extra", "world.events.player"} {
		if _, err := e.JS.Publish(ctx, subject, []byte("{}")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Errorf("publish to %s: %v, want no stream response", subject, err)
		}
	}
	for _, typ := range events.EventTypes() {
		if _, err := e.JS.Publish(ctx, events.Subject(typ), []byte("{}")); err != nil {
			t.Errorf("publish to %s: %v", events.Subject(typ), err)
		}
	}
}

func TestRetentionFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var o natsx.TopologyOptions
	o.RegisterFlags(fs)
	if err := fs.Parse([]string{"-retention", "WORLD=12h/4GiB,COMMITTED=90d/,worldgate-dedup=/1MiB", "-replicas", "3"}); err != nil {
		t.Fatal(err)
	}
	topo := natsx.DefaultTopology(o)
	if err := natsx.CheckLimits(topo, natsx.ServerMaxPayload); err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int64{}
	for _, s := range topo.Streams {
		got[s.Name] = [2]int64{int64(s.MaxAge), s.MaxBytes}
		if s.Replicas != 3 {
			t.Errorf("%s replicas %d", s.Name, s.Replicas)
		}
	}
	for _, b := range topo.Buckets {
		got[b.Bucket] = [2]int64{int64(b.TTL), b.MaxBytes}
	}
	want := map[string][2]int64{
		events.StreamWorld:     {int64(12 * time.Hour), 4 << 30},
		events.StreamCommitted: {int64(90 * 24 * time.Hour), natsx.DefaultLimits[events.StreamCommitted].MaxBytes},
		natsx.BucketDedup:      {int64(natsx.DefaultLimits[natsx.BucketDedup].MaxAge), 1 << 20},
		events.StreamAudit:     {int64(natsx.DefaultLimits[events.StreamAudit].MaxAge), natsx.DefaultLimits[events.StreamAudit].MaxBytes},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: age/bytes %v, want %v", name, got[name], w)
		}
	}
	for _, bad := range []string{"NOPE=1h/1GiB", "WORLD=1h/lots", "WORLD=-1h/", "WORLD"} {
		if _, err := natsx.ParseRetention(bad); err == nil {
			t.Errorf("-retention %s accepted", bad)
		}
	}
	if back, err := natsx.ParseRetention(natsx.DefaultRetention()); err != nil || len(back) != len(natsx.DefaultLimits) {
		t.Errorf("the defaults' own syntax does not parse back: %v", err)
	}
}
