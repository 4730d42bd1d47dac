package natsx_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// A PROPOSALS stream provisioned before partitioned commits gets its partitions in place and
// keeps what it holds (a validated proposal on the legacy subject still waits for the
// processor); from then on one actor's proposals all land on one partition, different actors
// spread over several; and the partition count, once set, cannot change in place.
func TestProposalsArePartitionedByActor(t *testing.T) {
	e := natstest.Start(t)
	ctx := context.Background()
	s, err := e.JS.Stream(ctx, events.StreamProposals)
	if err != nil {
		t.Fatal(err)
	}
	old := s.CachedInfo().Config
	old.SubjectTransform = nil // as provisioned before partitioned commits
	if _, err := e.JS.UpdateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := natsx.ProposalPartitions(ctx, e.JS); err == nil || !strings.Contains(err.Error(), "provision it again") {
		t.Fatalf("partitions of an old stream: %v, want an error saying to provision it again", err)
	}
	if _, err := e.JS.Publish(ctx, events.SubjectValidatedLegacy, []byte(`{"legacy":true}`)); err != nil {
		t.Fatal(err)
	}

	if err := natsx.Provision(ctx, e.JS, natsx.DefaultTopology(natsx.TopologyOptions{}), logx.Discard()); err != nil {
		t.Fatal(err)
	}
	n, err := natsx.ProposalPartitions(ctx, e.JS)
	if err != nil || n != natsx.DefaultPartitions {
		t.Fatalf("partitions after provisioning: %d, %v; want %d", n, err, natsx.DefaultPartitions)
	}
	if got := natstest.StreamMsgs(t, e.JS, events.StreamProposals, events.SubjectValidatedLegacy); got != 1 {
		t.Fatalf("the legacy validated proposal: %d stored, want it kept", got)
	}

	partitionOf := func(key string) string {
		ack, err := e.JS.Publish(ctx, events.ValidatedSubject(key), []byte(key))
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.GetMsg(ctx, ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		rest, ok := strings.CutPrefix(m.Subject, "proposals.validated.")
		p, token, _ := strings.Cut(rest, ".")
		if !ok || token != events.OrderToken(key) {
			t.Fatalf("stored as %s, want proposals.validated.<partition>.%s", m.Subject, events.OrderToken(key))
		}
		return p
	}
	seen := map[string]bool{}
	for i := range 40 {
		key := "player:p" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		p := partitionOf(key)
		if again := partitionOf(key); again != p {
			t.Fatalf("%s stored on partitions %s and %s", key, p, again)
		}
		seen[p] = true
	}
	if len(seen) < 8 {
		t.Errorf("40 actors landed on %d partitions of %d", len(seen), n)
	}

	err = natsx.Provision(ctx, e.JS, natsx.DefaultTopology(natsx.TopologyOptions{Partitions: 32}), logx.Discard())
	if err == nil || !strings.Contains(err.Error(), "cannot change in place") {
		t.Fatalf("changing the partition count: %v, want a refusal", err)
	}
	var cfg jetstream.StreamConfig
	if s, err = e.JS.Stream(ctx, events.StreamProposals); err == nil {
		cfg = s.CachedInfo().Config
	}
	if got := natsx.PartitionTransform(natsx.DefaultPartitions); cfg.SubjectTransform == nil || *cfg.SubjectTransform != *got {
		t.Fatalf("transform after the refused change: %+v", cfg.SubjectTransform)
	}
}

func TestAPartitionCountOutOfRangeIsRefused(t *testing.T) {
	e := natstest.Start(t)
	for _, n := range []int{-1, natsx.MaxPartitions + 1} {
		err := natsx.Provision(context.Background(), e.JS, natsx.DefaultTopology(natsx.TopologyOptions{Partitions: n}), logx.Discard())
		if err == nil || !strings.Contains(err.Error(), "-partitions") {
			t.Errorf("%d partitions: %v, want a refusal naming -partitions", n, err)
		}
	}
}
