package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/shared/attest/attesttest"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
)

func writer(t testing.TB, url string) *graphx.Conn {
	t.Helper()
	c, err := graphx.Open(graphx.Settings{URL: url, Username: graphdtest.WriterUser, Password: graphdtest.WriterPassword,
		ReadTimeout: 5 * time.Second, ConnectionTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func reader(t testing.TB, url string) *graphx.Conn {
	t.Helper()
	c, err := graphx.Open(graphx.Settings{URL: url, Username: graphdtest.ReaderUser, Password: graphdtest.ReaderPassword, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// startProcessor starts JetStream and graphd in this process and one processor on them, writing
// as the writer user; reg holds the processor's metrics.
func startProcessor(t testing.TB) (e *natstest.Env, gd *server.Server, reg *prometheus.Registry) {
	t.Helper()
	e, gd, reg = natstest.Start(t), graphdtest.Start(t), prometheus.NewRegistry()
	runProcessor(t, e, writer(t, gd.URL()), reg)
	return e, gd, reg
}

// runProcessor runs the processor in this process on e, writing through g; opts change its
// dependencies.
func runProcessor(t testing.TB, e *natstest.Env, g processor.Graph, reg *prometheus.Registry, opts ...func(*processor.Deps)) *processor.Processor {
	t.Helper()
	app, err := runtime.New(runtime.Options{Name: processor.Name, Conn: e.Conn, JetStream: e.JS, Registerer: reg,
		Logger: logx.Discard(), CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d := processor.Deps{Graph: g, Keyring: keys.Ring, Registerer: reg, Logger: logx.Discard(),
		AckWait: 5 * time.Second, Backoff: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}}
	for _, o := range opts {
		o(&d)
	}
	p, err := processor.Register(app, d)
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.Start(t, app)
	return p
}

// keys are the gates' signing keys of these tests; the processor accepts them.
var keys = attesttest.New()

func proposal(kind, id string, payload any) *events.Proposal {
	raw, err := json.Marshal(payload)
	if err != nil {
		panic(err) // test data
	}
	role := ""
	for _, e := range events.Emitters() {
		if events.EmitterMay(e, kind) {
			role = e
			break
		}
	}
	info, _ := events.LookupKind(kind)
	return &events.Proposal{
		ProposalID: id, Kind: kind, SchemaVersion: events.ProposalSchemaVersion, CorrelationID: "corr-" + id,
		CausationID: "cause-" + id, AgentRole: role, Actor: events.Actor{Kind: "operator", ID: "test"},
		Payload: raw, Route: events.Route{Pending: []string{}}, CreatedUTC: time.Now().UTC(), RequiresApproval: info.Destructive,
	}
}

// attested is p as honest gates forward it: every gate of its route passed and signed (an
// operator approved where a person must), its pending gates as the test set them. A proposal
// that already has a trail is left alone.
func attested(p *events.Proposal) *events.Proposal {
	if len(p.Route.Trail) > 0 {
		return p
	}
	q := *p
	if err := keys.PassAll(&q, "ops:test"); err != nil {
		panic(err) // test data
	}
	q.Route.Pending = p.Route.Pending
	return &q
}

func publish(t testing.TB, js jetstream.JetStream, p *events.Proposal, msgID string) {
	t.Helper()
	data, err := json.Marshal(attested(p))
	if err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: p.Next(), Data: data, Header: nats.Header{}}
	msg.Header.Set(events.HeaderCorrelationID, p.CorrelationID)
	if _, err := js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(msgID)); err != nil {
		t.Fatal(err)
	}
}

// publishAsync publishes many proposals quickly and waits for every ack.
func publishAsync(t testing.TB, js jetstream.JetStream, ps []*events.Proposal, msgID func(i int) string) {
	t.Helper()
	var futures []jetstream.PubAckFuture
	for i, p := range ps {
		data, err := json.Marshal(attested(p))
		if err != nil {
			t.Fatal(err)
		}
		// Wait for the acks of each batch before the next: past nats.go's limit of outstanding
		// async publishes a publish fails after a short stall ("too many outstanding async
		// published messages"), which a loaded machine reaches.
		if i > 0 && i%1000 == 0 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(30 * time.Second):
				t.Fatal("publish acks timed out")
			}
		}
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: p.Next(), Data: data}, jetstream.WithMsgID(msgID(i)))
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatal("publish ack timed out")
		}
	}
}

func committed(t testing.TB, e *natstest.Env) uint64 {
	return natstest.StreamMsgs(t, e.JS, events.StreamCommitted, "")
}

func rejected(t testing.TB, e *natstest.Env) uint64 {
	return natstest.StreamMsgs(t, e.JS, events.StreamProposals, events.RejectedSubject(processor.Gate))
}

func settled(t testing.TB, e *natstest.Env) bool {
	for _, info := range processorConsumers(t, e) {
		if info.NumPending > 0 || info.NumAckPending > 0 {
			return false
		}
	}
	return true
}

// processorConsumers are the processor's consumers: its partitions' and its own (the legacy
// subject's).
func processorConsumers(t testing.TB, e *natstest.Env) []*jetstream.ConsumerInfo {
	s, err := e.JS.Stream(context.Background(), events.StreamProposals)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.ConsumerInfo
	l := s.ListConsumers(context.Background())
	for info := range l.Info() {
		if info.Name == processor.Name || strings.HasPrefix(info.Name, processor.Name+"-p") {
			out = append(out, info)
		}
	}
	return out
}

// counts returns vertex and edge counts by label.
func counts(t testing.TB, g *graphx.Conn) (map[string]int64, map[string]int64) {
	t.Helper()
	group := func(build func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal) map[string]int64 {
		res, err := g.Submit(context.Background(), build)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		if len(res) == 1 {
			if m, ok := res[0].(map[any]any); ok {
				for k, v := range m {
					out[fmt.Sprint(k)] = v.(int64)
				}
			}
		}
		return out
	}
	v := group(func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.V().GroupCount().By(gremlingo.T.Label)
	})
	e := group(func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal {
		return g.E().GroupCount().By(gremlingo.T.Label)
	})
	return v, e
}

func values(t testing.TB, g *graphx.Conn, build func(g *gremlingo.GraphTraversalSource) *gremlingo.GraphTraversal) []any {
	t.Helper()
	res, err := g.Submit(context.Background(), build)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func equalCounts(got, want map[string]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// restartGraphd starts graphd again on the same address and data directory.
func restartGraphd(t testing.TB, addr, dir string) *server.Server {
	t.Helper()
	return graphdtest.Start(t, graphdtest.WithDataDir(dir), graphdtest.WithConfig(func(c *server.Config) { c.Listen = addr }))
}

// readAll returns the data of every message on subject, in stream order.
func readAll(t testing.TB, e *natstest.Env, subject string) [][]byte {
	t.Helper()
	stream := events.StreamProposals
	if strings.HasPrefix(subject, "world.committed.") {
		stream = events.StreamCommitted
	}
	if strings.HasPrefix(subject, "world.outcomes.") {
		stream = events.StreamOutcomes
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := natstest.StreamMsgs(t, e.JS, stream, subject)
	c, err := e.JS.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for uint64(len(out)) < want {
		batch, err := c.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			out = append(out, m.Data())
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
	}
	return out
}
