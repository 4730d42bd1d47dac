package actorpolicy_test

import (
	"context"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/actorpolicy"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// The watch holds the policies stored before it started, and follows those set and cleared
// after, without a read per lookup.
func TestPolicyWatchFollowsTheControlBucket(t *testing.T) {
	n := natstest.Start(t)
	ctx := context.Background()
	control := n.KeyValue(t, natsx.BucketBudget)
	if err := actorpolicy.Set(ctx, control, actorpolicy.Policy{Actor: "player:ada", Multiplier: 0.5}); err != nil {
		t.Fatal(err)
	}
	w, err := actorpolicy.StartWatch(ctx, control, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if p := w.Get("player:ada"); p == nil || p.Multiplier != 0.5 {
		t.Fatalf("stored before the watch: %+v", p)
	}
	if p := w.Get("player:bo"); p != nil {
		t.Fatalf("bo has no policy, got %+v", p)
	}
	if err := actorpolicy.Set(ctx, control, actorpolicy.Policy{Actor: "player:bo", Multiplier: 0.25}); err != nil {
		t.Fatal(err)
	}
	if err := actorpolicy.Clear(ctx, control, "player:ada"); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 5*time.Second, "the watch to follow", func() bool {
		p := w.Get("player:bo")
		return p != nil && p.Multiplier == 0.25 && w.Get("player:ada") == nil
	})
}
