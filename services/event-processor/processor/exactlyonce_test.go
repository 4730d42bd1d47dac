package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// withDuplicates returns the workload's proposals with every tenth one published a second time
// under another Nats-Msg-Id (so JetStream's de-duplication does not catch it), 25 messages
// later, and the message ids to use.
func withDuplicates(w workload) ([]*events.Proposal, func(i int) string) {
	var ps []*events.Proposal
	var ids []string
	var pending []*events.Proposal
	for i, p := range w.proposals {
		ps = append(ps, p)
		ids = append(ids, p.ProposalID)
		if i%10 == 0 {
			pending = append(pending, p)
		}
		if i%25 == 24 && len(pending) > 0 {
			for _, d := range pending {
				ps = append(ps, d)
				ids = append(ids, d.ProposalID+"-again")
			}
			pending = nil
		}
	}
	for _, d := range pending {
		ps = append(ps, d)
		ids = append(ids, d.ProposalID+"-again")
	}
	return ps, func(i int) string { return ids[i] }
}

// verify checks the exact outcome: the expected graph, one committed event per proposal with
// its deterministic id, no rejection, no dead letter, every player's version = its moves.
func verify(t *testing.T, e *natstest.Env, ro *graphx.Conn, w workload) {
	t.Helper()
	v, ed := counts(t, ro)
	if !equalCounts(v, w.vertices) || !equalCounts(ed, w.edges) {
		t.Fatalf("graph holds vertices %v edges %v\nwant %v %v", v, ed, w.vertices, w.edges)
	}
	seen := map[string]int{}
	for _, subj := range []string{"world.committed.>"} {
		for _, raw := range readAll(t, e, subj) {
			var evt events.DomainEvent
			if err := json.Unmarshal(raw, &evt); err != nil {
				t.Fatal(err)
			}
			if evt.EventID != events.DomainEventID(evt.ProposalID, 0) {
				t.Fatalf("event %s of %s has a non-deterministic id", evt.EventID, evt.ProposalID)
			}
			seen[evt.ProposalID]++
		}
	}
	for _, p := range w.proposals {
		if seen[p.ProposalID] != 1 {
			t.Fatalf("proposal %s has %d committed events, want 1", p.ProposalID, seen[p.ProposalID])
		}
	}
	if len(seen) != len(w.proposals) {
		t.Fatalf("%d proposals committed, want %d", len(seen), len(w.proposals))
	}
	if n := rejected(t, e); n != 0 {
		t.Fatalf("%d rejections", n)
	}
	if n := natstest.StreamMsgs(t, e.JS, events.StreamDLQ, ""); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	versions := values(t, ro, func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V().HasLabel("Player").Values("version").Dedup()
	})
	if len(versions) != 1 || versions[0] != int64(w.moves) {
		t.Fatalf("player versions %v, want all %d", versions, w.moves)
	}
}

func TestExactlyOnceWithDuplicateDeliveries(t *testing.T) {
	e, gd, _ := startProcessor(t)
	w := newWorkload("x", 5000)
	ps, ids := withDuplicates(w)
	publishAsync(t, e.JS, ps, ids)
	if got := natstest.StreamMsgs(t, e.JS, events.StreamProposals, events.SubjectValidatedAll); got != uint64(len(ps)) || got < 5500 {
		t.Fatalf("%d proposals in the stream, want %d (5000 + 10%% again)", got, len(ps))
	}
	// Each proposal's attested route is verified before it is applied (several Ed25519
	// verifications): on a loaded CI machine the 5,500 take longer than the apply alone did.
	natstest.WaitFor(t, 180*time.Second, "every proposal committed", func() bool {
		return committed(t, e) >= uint64(len(w.proposals)) && settled(t, e)
	})
	verify(t, e, reader(t, gd.URL()), w)
}

// A read-only connection cannot write: the reader user is refused by the server even without
// ReadOnlyStrategy, and ReadOnlyStrategy refuses even for the writer user.
func TestWriteThroughReadOnlyConnectionIsRefused(t *testing.T) {
	gd := graphdtest.Start(t)
	addV := func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.AddV("Location").Property(gremlingo.T.Id, "loc:forbidden")
	}
	for name, s := range map[string]graphx.Settings{
		"reader user":            {URL: gd.URL(), Username: graphdtest.ReaderUser, Password: graphdtest.ReaderPassword},
		"ReadOnlyStrategy":       {URL: gd.URL(), Username: graphdtest.WriterUser, Password: graphdtest.WriterPassword, ReadOnly: true},
		"reader with a strategy": {URL: gd.URL(), Username: graphdtest.ReaderUser, Password: graphdtest.ReaderPassword, ReadOnly: true},
	} {
		c, err := graphx.Open(s)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Submit(context.Background(), addV)
		c.Close()
		if !graphx.IsServer(err) {
			t.Fatalf("%s: write returned %v, want a refusal from the server", name, err)
		}
	}
	if got := values(t, writer(t, gd.URL()), func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V().Count()
	}); fmt.Sprint(got) != "[0]" {
		t.Fatalf("graph holds %v vertices after refused writes", got)
	}
}
