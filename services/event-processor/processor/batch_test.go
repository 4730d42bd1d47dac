package processor_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// Under a backlog of many players' moves, the moves the processor applies at the same moment
// share graph requests, and still every move commits (a move applied before the one that
// brings the player to its start would be refused) in each player's order.
func TestBatchedMovesCommitInEachPlayersOrder(t *testing.T) {
	e, _, reg := startProcessor(t)
	w := newWalk("b", 6, 150)
	publishAsync(t, e.JS, w.setup, func(i int) string { return w.setup[i].ProposalID })
	natstest.WaitFor(t, 30*time.Second, "the world set up", func() bool { return committed(t, e) == uint64(len(w.setup)) })
	requests0, writes0 := batchSizes(t, reg)

	publishAsync(t, e.JS, w.moves, func(i int) string { return w.moves[i].ProposalID })
	w.checkOrder(t, e)
	requests, writes := batchSizes(t, reg)
	requests, writes = requests-requests0, writes-writes0
	if writes != uint64(len(w.moves)) || requests >= writes {
		t.Fatalf("%d graph requests carried %d moves' writes: want every move's, in fewer requests (batched)", requests, writes)
	}
	t.Logf("%d graph requests carried %d moves' writes", requests, writes)
}

// batchSizes returns how many graph requests the processor made and how many proposals' writes
// they carried.
func batchSizes(t *testing.T, reg *prometheus.Registry) (requests, writes uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "worldgate_commit_batch_size" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), uint64(h.GetSampleSum())
		}
	}
	t.Fatal("no worldgate_commit_batch_size")
	return 0, 0
}
