package gates_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/shared/graphx"
)

// heldGraph counts the requests made through it and holds them until release is closed.
type heldGraph struct {
	gates.Graph
	release  chan struct{}
	requests atomic.Int32
}

func (g *heldGraph) Submit(ctx context.Context, build func(*gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal) ([]any, error) {
	g.requests.Add(1)
	<-g.release
	return g.Graph.Submit(ctx, build)
}

// The invariant checks running at the same moment share their graph reads, and each still gets
// the decision it gets when checked alone.
func TestInvariantChecksAtOneMomentShareReadsAndDecideAsAlone(t *testing.T) {
	srv := graphdtest.Start(t, graphdtest.InMemory())
	reader, err := graphx.Open(graphx.Settings{ReadOnly: true, URL: srv.URL(), Username: graphdtest.ReaderUser, Password: graphdtest.ReaderPassword})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	seedWorld(t, graphdtest.Writer(t, srv.URL()))
	spec, _ := gates.Builtin().Lookup(gates.Invariant)
	newGate := func(g gates.Graph) gates.Gate {
		gate, err := spec.New(context.Background(), gates.Deps{Graph: g, Config: testConfig()})
		if err != nil {
			t.Fatal(err)
		}
		return gate
	}
	// Proposals that pass and that fail for different reasons, none depending on another's
	// decision (no move passes, so none is remembered).
	var ps []*events.Proposal
	for i := range 60 {
		switch i % 6 {
		case 0:
			ps = append(ps, ambience(t, "loc:square", "Quiet."))
		case 1:
			ps = append(ps, ambience(t, fmt.Sprintf("loc:nowhere-%d", i), "Void."))
		case 2:
			ps = append(ps, proposal(t, events.KindPlayerMoved, map[string]any{"playerId": "player:ada", "fromLocationId": "loc:market", "toLocationId": "loc:square", "direction": "west"}))
		case 3:
			ps = append(ps, proposal(t, events.KindExitAdded, map[string]any{"fromLocationId": "loc:square", "toLocationId": "loc:tower", "direction": "north"}))
		case 4:
			ps = append(ps, proposal(t, events.KindExitAdded, map[string]any{"fromLocationId": "loc:tower", "toLocationId": "loc:market", "direction": fmt.Sprint("dir-", i)}))
		case 5:
			ps = append(ps, proposal(t, events.KindNPCDialogue, map[string]any{"npcId": "npc:bram", "playerId": "player:ada", "locationId": "loc:market", "line": "Hm.", "intent": "greet"}))
		}
	}
	alone := newGate(reader)
	want := make([]string, len(ps))
	for i, p := range ps {
		d, err := alone.Check(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = fmt.Sprintf("%v %s %s", d.Outcome, d.Code, d.Reason)
	}

	held := &heldGraph{Graph: reader, release: make(chan struct{})}
	shared := newGate(held)
	got := make([]string, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := shared.Check(context.Background(), p)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = fmt.Sprintf("%v %s %s", d.Outcome, d.Code, d.Reason)
		}()
	}
	time.Sleep(100 * time.Millisecond) // let the checks queue behind the two held reads (not a wait for a result)
	close(held.release)
	wg.Wait()
	for i := range ps {
		if got[i] != want[i] {
			t.Errorf("proposal %d (%s): %q checked with others, %q alone", i, ps[i].Kind, got[i], want[i])
		}
	}
	if n := held.requests.Load(); n >= int32(len(ps))/4 {
		t.Errorf("%d reads for %d checks at one moment: want them shared", n, len(ps))
	} else {
		t.Logf("%d reads for %d checks", n, len(ps))
	}
}
