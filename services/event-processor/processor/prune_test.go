package processor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// Markers are kept for the horizon and dropped after it: a proposal that comes again inside
// the horizon (another message, as a redelivery or a re-run agent makes it) applies once and
// writes nothing; once the clock passes the horizon the markers go, and nothing else does.
func TestMarkersArePrunedPastTheHorizonAndRedeliveryInsideAppliesOnce(t *testing.T) {
	e, gd, reg := startProcessor(t)
	w := writer(t, gd.URL()) // the pruner's
	ro := reader(t, gd.URL())
	ps := []*events.Proposal{
		proposal(events.KindLocationCreated, "m1", obj{"locationId": "loc:gate", "name": "Gate", "description": "A gate."}),
		proposal(events.KindLocationCreated, "m2", obj{"locationId": "loc:well", "name": "Well", "description": "A well."}),
		proposal(events.KindLocationCreated, "m3", obj{"locationId": "loc:gate", "name": "Again", "description": "x"}), // conflict
	}
	for _, p := range ps {
		publish(t, e.JS, p, p.ProposalID)
	}
	natstest.WaitFor(t, 15*time.Second, "all decided", func() bool { return committed(t, e) == 2 && rejected(t, e) == 1 && settled(t, e) })

	now := time.Now()
	clock := now
	pr, err := processor.NewPruner(w, processor.PruneConfig{Horizon: 2 * time.Hour, Batch: 2, Now: func() time.Time { return clock }}, reg, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	// An hour later (inside the horizon): nothing is pruned, and m1 arriving again in another
	// message applies nothing.
	clock = now.Add(time.Hour)
	if n, err := pr.PruneOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("inside the horizon: pruned %d, %v", n, err)
	}
	publish(t, e.JS, ps[0], "m1-redelivered")
	natstest.WaitFor(t, 15*time.Second, "the repeat settled", func() bool { return settled(t, e) })
	if n := committed(t, e); n != 2 {
		t.Fatalf("%d committed events after the repeat inside the horizon, want 2", n)
	}
	v, _ := counts(t, ro)
	if v["Location"] != 2 || v["AppliedEvent"] != 2 || v["CommitConflict"] != 1 {
		t.Fatalf("vertices %v", v)
	}
	// Past the horizon: the three markers go (two batches of two), the locations stay.
	clock = now.Add(3 * time.Hour)
	if n, err := pr.PruneOnce(context.Background()); err != nil || n != 3 {
		t.Fatalf("past the horizon: pruned %d, %v; want 3", n, err)
	}
	v, _ = counts(t, ro)
	if v["Location"] != 2 || v["AppliedEvent"] != 0 || v["CommitConflict"] != 0 {
		t.Fatalf("vertices after pruning %v", v)
	}
	if got := metricstest.Sum(t, reg, "worldgate_markers_pruned_total", nil); got != 3 {
		t.Fatalf("markers_pruned_total %v", got)
	}
}

func TestHorizonMustOutlastTheStreams(t *testing.T) {
	topo := natsx.DefaultTopology(natsx.TopologyOptions{})
	if err := processor.CheckHorizon(72*time.Hour, topo); err != nil {
		t.Fatalf("the default horizon against the default topology: %v", err)
	}
	err := processor.CheckHorizon(24*time.Hour, topo)
	if err == nil || !strings.Contains(err.Error(), "shorter than WORLD's and PROPOSALS' max ages together (48h0m0s)") {
		t.Fatalf("a 24h horizon: %v", err)
	}
}
