package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/event-processor/apply"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/shared/graphx"
)

// item is the apply item of a proposal of kind with payload, decided by message seq.
func item(t *testing.T, kind, id string, payload map[string]any, seq int) apply.Item {
	t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := apply.Build(&events.Proposal{ProposalID: id, Kind: kind, CorrelationID: "corr-" + id, Payload: raw})
	if err != nil {
		t.Fatal(err)
	}
	return apply.Item{Command: cmds[0], Meta: apply.Meta{ProposalID: id, CorrelationID: "corr-" + id,
		CommittedUTC: time.Now().UTC().Format(time.RFC3339Nano), Source: fmt.Sprintf("PROPOSALS:%d", seq)}}
}

func location(t *testing.T, id, loc string, seq int) apply.Item {
	return item(t, events.KindLocationCreated, id, map[string]any{"locationId": loc, "name": loc, "description": "A place."}, seq)
}

func exit(t *testing.T, id, from, to string, seq int) apply.Item {
	return item(t, events.KindExitAdded, id, map[string]any{"fromLocationId": from, "toLocationId": to, "direction": "east"}, seq)
}

func openWriter(t *testing.T) *graphx.Conn {
	t.Helper()
	srv := graphdtest.Start(t)
	c, err := graphx.Open(graphx.Settings{URL: srv.URL(), Username: graphdtest.WriterUser, Password: graphdtest.WriterPassword,
		ReadTimeout: 5 * time.Second, ConnectionTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// One request applies a batch's commands as each would apply alone, in order: a later command
// sees an earlier one's write, a decided event keeps its decision, a rule that fails is
// recorded for that command only.
func TestBatchDecidesEachCommandAsAlone(t *testing.T) {
	g := openWriter(t)
	ctx := context.Background()
	first := exit(t, "p-exit-early", "loc:a", "loc:b", 1) // before its locations: refused, once
	items := []apply.Item{first, location(t, "p-a", "loc:a", 2), location(t, "p-b", "loc:b", 3)}
	res, err := g.Submit(ctx, func(s *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal { return apply.Batch(s, items) })
	if err != nil {
		t.Fatal(err)
	}
	ds, err := apply.ReadDecisions(res, items)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Applied || !strings.Contains(ds[0].Reason, "loc:a does not exist") || !ds[1].Applied || !ds[2].Applied {
		t.Fatalf("first batch: %+v", ds)
	}
	// The refused exit again (a redelivery), an exit that now finds both locations, one that
	// needs a location created later in the same batch, and a location that exists already.
	later := []apply.Item{first, exit(t, "p-exit", "loc:a", "loc:b", 4), exit(t, "p-exit-c", "loc:b", "loc:c", 5),
		location(t, "p-c", "loc:c", 6), location(t, "p-a-again", "loc:a", 7), exit(t, "p-exit-c2", "loc:b", "loc:c", 8)}
	res, err = g.Submit(ctx, func(s *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal { return apply.Batch(s, later) })
	if err != nil {
		t.Fatal(err)
	}
	ds, err = apply.ReadDecisions(res, later)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		applied bool
		source  string
		reason  string
	}{
		{false, "PROPOSALS:1", "loc:a does not exist"}, // decided by the first batch's message
		{true, "PROPOSALS:4", ""},
		{false, "PROPOSALS:5", "loc:c does not exist"}, // loc:c comes after it
		{true, "PROPOSALS:6", ""},
		{false, "PROPOSALS:7", "loc:a already exists"},
		{true, "PROPOSALS:8", ""}, // after loc:c, in the same transaction
	}
	for i, w := range want {
		d := ds[i]
		if d.Applied != w.applied || d.Source != w.source || !strings.Contains(d.Reason, w.reason) || (w.reason == "" && d.Reason != "") {
			t.Errorf("item %d (%s): %+v, want applied=%v source=%s reason~%q", i, later[i].Meta.ProposalID, d, w.applied, w.source, w.reason)
		}
	}
	// An answer for another command than the one asked is found out, never misread.
	swapped := []apply.Item{later[1], later[0]}
	res, err = g.Submit(ctx, func(s *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal { return apply.Batch(s, later[:2]) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apply.ReadDecisions(res, swapped); err == nil || !strings.Contains(err.Error(), "answered for marker") {
		t.Fatalf("answers read against the wrong commands: %v", err)
	}
}

// gatedGraph holds every request until release is closed, refuses (as the server would) any
// request carrying poison's marker, fails every request with transport errors while down, and
// records the markers each request carried.
type gatedGraph struct {
	Graph
	release chan struct{}
	poison  string
	down    bool
	held    atomic.Int32 // requests that reached Submit

	mu       sync.Mutex
	requests [][]string
}

func (g *gatedGraph) Submit(ctx context.Context, build func(*gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal) ([]any, error) {
	g.held.Add(1)
	<-g.release
	bc, err := gremlingo.NewTranslator("g").Translate(build(gremlingo.NewGraphTraversalSource(nil, nil)).Bytecode)
	if err != nil {
		return nil, err
	}
	var markers []string
	for _, f := range strings.FieldsFunc(bc, func(r rune) bool { return r == '\'' || r == '"' }) {
		if strings.HasPrefix(f, "evt:") && !contains(markers, f) {
			markers = append(markers, f)
		}
	}
	g.mu.Lock()
	g.requests = append(g.requests, markers)
	g.mu.Unlock()
	if g.down {
		return nil, &graphx.TransportError{Err: errors.New("connection refused")}
	}
	if g.poison != "" && strings.Contains(bc, g.poison) {
		return nil, &graphx.ServerError{Err: errors.New("the server refused this traversal")}
	}
	return g.Graph.Submit(ctx, build)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// await waits until sending requests are held in g and queued calls wait in c.
func await(t *testing.T, g *gatedGraph, c *committer, sending, queued int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, q := int(g.held.Load()), c.group.Waiting()
		if s == sending && q == queued {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests in flight, %d calls queued; want %d, %d", s, q, sending, queued)
		}
		time.Sleep(time.Millisecond)
	}
}

// The commands that wait while batchRequests requests are in flight go together in the next;
// a batch the graph refuses is applied one command per request, so the bad command alone gets
// the server's error; a graph that cannot be reached fails each command of the batch, once.
func TestCommitterSharesRequestsAndSplitsARefusedBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		down bool
	}{{"refused", false}, {"unreachable", true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gatedGraph{Graph: openWriter(t), release: make(chan struct{}), down: tc.down}
			size := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "size", Buckets: []float64{1, 2, 4, 8, 16}})
			c := newCommitter(g, 16, size)
			items := make([]apply.Item, 7)
			for i := range items {
				items[i] = location(t, fmt.Sprintf("p-%d", i), fmt.Sprintf("loc:%d", i), i+1)
			}
			g.poison = events.MarkerID(items[4].Command.EventID)
			type out struct {
				d   apply.Decision
				err error
			}
			outs := make([]out, len(items))
			var wg sync.WaitGroup
			run := func(i int) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					outs[i].d, outs[i].err = c.apply(context.Background(), items[i])
				}()
			}
			run(0)
			run(1)
			await(t, g, c, 2, 0) // both in flight, held by the graph
			for i := 2; i < len(items); i++ {
				run(i)
			}
			await(t, g, c, 2, len(items)-2)
			close(g.release)
			wg.Wait()

			marker := func(i int) string { return events.MarkerID(items[i].Command.EventID) }
			var m dto.Metric
			if err := size.Write(&m); err != nil {
				t.Fatal(err)
			}
			if tc.down {
				for i, o := range outs {
					if !graphx.IsTransport(o.err) {
						t.Errorf("item %d: %+v %v, want the transport error", i, o.d, o.err)
					}
				}
				if len(g.requests) != 3 {
					t.Errorf("requests %v, want 3: two alone, then the five that waited in one (none retried alone)", g.requests)
				}
				return
			}
			for i, o := range outs {
				if i == 4 {
					if !graphx.IsServer(o.err) {
						t.Errorf("the refused command: %+v %v, want the server's refusal", o.d, o.err)
					}
					continue
				}
				if o.err != nil || !o.d.Applied || o.d.Source != items[i].Meta.Source {
					t.Errorf("item %d: %+v %v, want applied by its own message", i, o.d, o.err)
				}
			}
			// Two alone, the five that waited in one request (refused), then each of them alone
			// (the goroutines of each group race, so each group is compared as a set).
			if len(g.requests) != 8 {
				t.Fatalf("requests %v, want 8", g.requests)
			}
			group := func(rs [][]string, each int) string {
				var all []string
				for _, r := range rs {
					if len(r) != each {
						return fmt.Sprintf("a request of %d: %v", len(r), r)
					}
					all = append(all, r...)
				}
				slices.Sort(all)
				return fmt.Sprint(all)
			}
			markers := func(from, to int) string {
				var all []string
				for i := from; i < to; i++ {
					all = append(all, marker(i))
				}
				slices.Sort(all)
				return fmt.Sprint(all)
			}
			if got, want := group(g.requests[:2], 1), markers(0, 2); got != want {
				t.Errorf("the first two requests: %s, want each alone: %s", got, want)
			}
			if got, want := group(g.requests[2:3], 5), markers(2, 7); got != want {
				t.Errorf("the third request: %s, want the five that waited: %s", got, want)
			}
			if got, want := group(g.requests[3:], 1), markers(2, 7); got != want {
				t.Errorf("after the refusal: %s, want each of the five alone: %s", got, want)
			}
			if m.Histogram.GetSampleCount() != 8 || m.Histogram.GetSampleSum() != 12 {
				t.Errorf("batch sizes observed: %d requests carrying %v, want 8 carrying 12", m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum())
			}
		})
	}
}
