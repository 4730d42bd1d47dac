package gates_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/provenance"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/shared/attest/attesttest"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
)

const classifyToken = "gate-test-token-0000000001"

// stack is the real embedded Worldgate stack the gates run on: NATS JetStream, graphd with a
// small seeded world, and mcp-classify over Streamable HTTP through the real MCP client.
type stack struct {
	nats     *natstest.Env
	graph    *server.Server
	reader   *graphx.Conn
	writer   *gremlingo.GraphTraversalSource
	classify *httptest.Server
	mcp      *client.Client
	reg      *prometheus.Registry
	keys     *attesttest.Keys // every gate's signing key
}

var templates = gates.TemplateMap{
	"ambience@1.0.0":     provenance.Sum([]byte("ambience template v1")),
	"npc_dialogue@1.0.0": provenance.Sum([]byte("dialogue template v1")),
	"quest_seed@1.0.0":   provenance.Sum([]byte("quest template v1")),
}

func newStack(t testing.TB) *stack {
	t.Helper()
	s := &stack{nats: natstest.Start(t), graph: graphdtest.Start(t, graphdtest.InMemory()), reg: prometheus.NewRegistry(), keys: attesttest.New()}
	reader, err := graphx.Open(graphx.Settings{ReadOnly: true, URL: s.graph.URL(), Username: graphdtest.ReaderUser, Password: graphdtest.ReaderPassword})
	if err != nil {
		t.Fatal(err)
	}
	s.reader = reader
	t.Cleanup(s.reader.Close)
	s.writer = graphdtest.Writer(t, s.graph.URL())
	seedWorld(t, s.writer)

	srv, err := classifytools.New(classifytools.Options{Options: mcpx.Options{Auth: mcpx.AuthConfig{
		StaticTokens: map[string]mcpx.Principal{classifyToken: {Subject: "gate", Scopes: []string{mcpx.ScopeClassifyRead}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s.classify = httptest.NewServer(srv.Handler())
	t.Cleanup(s.classify.Close)
	s.mcp, err = client.New(context.Background(), client.Config{Servers: []client.ServerConfig{{Name: "classify", URL: s.classify.URL, Token: classifyToken, Timeout: 5 * time.Second}},
		AllowList: []string{gates.ModerateTool}, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.mcp.Close() })
	return s
}

// seedWorld: the square (north → gate, east → market), the gate (south → square), the market,
// the tower (no exits); ada at the square; bram (guard) at the square.
func seedWorld(t testing.TB, g *gremlingo.GraphTraversalSource) {
	t.Helper()
	T := gremlingo.T
	run := func(tr *gremlingo.GraphTraversal) {
		t.Helper()
		if err := <-tr.Iterate(); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
	for _, l := range []string{"square", "gate", "market", "tower"} {
		run(g.AddV("Location").Property(T.Id, "loc:"+l).Property("name", l).Property("version", int64(1)))
	}
	exit := func(from, dir, to string) {
		run(g.V("loc:"+from).AddE("exit").To(gremlingo.T__.V("loc:"+to)).Property("direction", dir))
	}
	exit("square", "north", "gate")
	exit("square", "east", "market")
	exit("gate", "south", "square")
	run(g.AddV("Faction").Property(T.Id, "faction:guard").Property("name", "City Guard"))
	run(g.AddV("Player").Property(T.Id, "player:ada").Property("name", "Ada"))
	run(g.V("player:ada").AddE("at").To(gremlingo.T__.V("loc:square")))
	run(g.AddV("NPC").Property(T.Id, "npc:bram").Property("name", "Bram"))
	run(g.V("npc:bram").AddE("at").To(gremlingo.T__.V("loc:square")))
	run(g.V("npc:bram").AddE("member_of").To(gremlingo.T__.V("faction:guard")))
}

func (s *stack) deps(cfg gates.Config) gates.Deps {
	return gates.Deps{JetStream: s.nats.JS, Classify: s.mcp, Graph: s.reader, Templates: templates, Signers: s.keys.Signers,
		Config: cfg, Registerer: s.reg, Logger: logx.Discard()}
}

// testConfig redelivers fast and dead-letters after three deliveries.
func testConfig() gates.Config {
	return gates.Config{MaxDeliver: 3, Backoff: []time.Duration{20 * time.Millisecond},
		Invariant: gates.InvariantConfig{ReferenceWait: -1},
		Rate:      gates.RateConfig{Window: time.Hour, Budgets: map[string]gates.Budget{}}}
}

// run starts an app with the named gates; it drains when the test ends.
func (s *stack) run(t testing.TB, deps gates.Deps, names ...string) *runtime.App {
	t.Helper()
	app, err := runtime.New(runtime.Options{Name: "gate", Conn: s.nats.Conn, JetStream: s.nats.JS, Registerer: prometheus.NewRegistry(),
		Logger: logx.Discard(), Retries: -1, CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := gates.Builtin().Register(context.Background(), app, deps, names); err != nil {
		t.Fatal(err)
	}
	runtimetest.Start(t, app)
	return app
}

var idSeq struct {
	sync.Mutex
	n int
}

func nextID(prefix string) string {
	idSeq.Lock()
	defer idSeq.Unlock()
	idSeq.n++
	return fmt.Sprintf("%s-%05d", prefix, idSeq.n)
}

// proposal builds a valid proposal of kind with payload, a complete provenance for AI kinds and
// the kind's default route.
func proposal(t testing.TB, kind string, payload any) *events.Proposal {
	t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := route.Default().For(kind)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := events.LookupKind(kind)
	id := nextID("prop")
	p := &events.Proposal{ProposalID: id, Kind: kind, SchemaVersion: events.ProposalSchemaVersion, CorrelationID: "corr-" + id,
		CausationID: "evt-" + id, AgentRole: "ambience", Actor: events.Actor{Kind: "player", ID: "player:ada"}, Payload: raw,
		Route: events.Route{Pending: pending}, RequiresApproval: info.Destructive, CreatedUTC: time.Now().UTC()}
	switch kind {
	case events.KindAmbience, events.KindNPCDialogue, events.KindQuestSeed:
		p.Provenance = provenanceFor(t, kind)
		p.AgentRole = map[string]string{events.KindNPCDialogue: "npc-dialogue", events.KindQuestSeed: "quest-planner"}[kind]
		if p.AgentRole == "" {
			p.AgentRole = "ambience"
		}
	case events.KindPlayerMoved:
		p.AgentRole = "world-rules"
	default:
		p.AgentRole = "world-loader"
		p.Actor = events.Actor{Kind: "operator", ID: "ops"}
	}
	return p
}

func provenanceFor(t testing.TB, kind string) *events.Provenance {
	t.Helper()
	result := json.RawMessage(`{"locationId":"loc:square","name":"square","exits":["north","east"]}`)
	argsHash, _ := provenance.ArgsHash(map[string]any{"locationId": "loc:square"})
	resultHash, _ := provenance.ResultHash(result)
	calls := []events.ToolCall{{Server: "world", Tool: "get-location", ArgsHash: argsHash, ResultHash: resultHash, Result: result}}
	sha, _ := templates.Lookup(kind, "1.0.0")
	ctxHash, err := provenance.ContextHash(kind, sha, provenance.ToolResults(calls), "scripted-small")
	if err != nil {
		t.Fatal(err)
	}
	return &events.Provenance{Provider: "scripted", Model: "scripted-small", PromptTemplate: &events.TemplateRef{ID: kind, Version: "1.0.0", SHA256: sha},
		ContextHash: ctxHash, ToolCalls: calls, Tokens: events.Tokens{Prompt: 120, Completion: 40}, CostUSD: 0.0004, Temperature: 0.7, Seed: 7}
}

func ambience(t testing.TB, loc, text string) *events.Proposal {
	return proposal(t, events.KindAmbience, map[string]any{"locationId": loc, "text": text, "mood": "calm"})
}

// startAt trims the proposal's route so that it starts at gate (to exercise one gate alone).
func startAt(p *events.Proposal, gate string) *events.Proposal {
	if i := slices.Index(p.Route.Pending, gate); i >= 0 {
		p.Route.Pending = p.Route.Pending[i:]
	}
	return p
}

// publish sends p to its first gate.
func (s *stack) publish(t testing.TB, p *events.Proposal) {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	subject := p.Next()
	if len(p.Route.Pending) > 0 && p.Route.Pending[0] == gates.Schema {
		subject = events.EmitSubject(p.AgentRole) // new proposals enter on their emitter's subject
	}
	s.publishRaw(t, subject, p.ProposalID+":emit", data)
}

func (s *stack) publishRaw(t testing.TB, subject, id string, data []byte) {
	t.Helper()
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(events.HeaderCorrelationID, "corr-"+id)
	if _, err := s.nats.JS.PublishMsg(context.Background(), msg, jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
}

// count is how many messages the stream holds on subject.
func (s *stack) count(t testing.TB, stream, subject string) int {
	return int(natstest.StreamMsgs(t, s.nats.JS, stream, subject))
}

// messages returns every message on subject (a filter such as proposals.rejected.>).
func (s *stack) messages(t testing.TB, stream, subject string) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.nats.JS.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	want := s.count(t, stream, subject)
	var out []jetstream.Msg
	for len(out) < want {
		batch, err := c.Fetch(want-len(out), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			out = append(out, m)
			n++
		}
		if n == 0 {
			t.Fatalf("fetched %d of %d messages on %s", len(out), want, subject)
		}
	}
	return out
}

func (s *stack) rejections(t testing.TB) map[string]*events.Rejection {
	t.Helper()
	out := map[string]*events.Rejection{}
	for _, m := range s.messages(t, events.StreamProposals, events.SubjectRejectedAll) {
		var r events.Rejection
		if err := json.Unmarshal(m.Data(), &r); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[r.ProposalID]; dup {
			t.Errorf("proposal %s rejected twice", r.ProposalID)
		}
		out[r.ProposalID] = &r
	}
	return out
}

func (s *stack) proposalsOn(t testing.TB, subject string) map[string]*events.Proposal {
	t.Helper()
	out := map[string]*events.Proposal{}
	for _, m := range s.messages(t, events.StreamProposals, subject) {
		p, err := events.DecodeProposal(m.Data())
		if err != nil {
			t.Fatalf("message on %s is not a valid proposal: %v", subject, err)
		}
		if _, dup := out[p.ProposalID]; dup {
			t.Errorf("proposal %s on %s twice", p.ProposalID, subject)
		}
		out[p.ProposalID] = p
	}
	return out
}

// waitRejected waits for a rejection of id and returns it.
func (s *stack) waitRejected(t testing.TB, id string) *events.Rejection {
	t.Helper()
	var r *events.Rejection
	seen := -1
	natstest.WaitFor(t, 15*time.Second, "rejection of "+id, func() bool {
		// Read the rejections again only when there are more: each read takes a consumer of its
		// own, and a long wait used to end in "maximum consumers limit reached" instead of
		// naming the rejection it waited for.
		if n := s.count(t, events.StreamProposals, events.SubjectRejectedAll); n != seen {
			seen, r = n, s.rejections(t)[id]
		}
		return r != nil
	})
	return r
}

// retry does what the ai-worker does with a transient refusal (agent/rejection.go), once the
// wait is over: the refused proposal goes back on the refusing gate's retry subject, its route
// resumed at that gate.
func (s *stack) retry(t testing.TB, r *events.Rejection) {
	t.Helper()
	p := *r.Proposal
	full, _ := route.Default().For(p.Kind)
	p.Route = events.Route{Pending: full[slices.Index(full, r.Gate):], Trail: p.Route.Trail}
	data, err := json.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	s.publishRaw(t, events.RetrySubject(r.Gate), p.ProposalID+":retry", data)
}

// deadLetters returns the dead letters of a gate.
func (s *stack) deadLetters(t testing.TB, gate string) []jetstream.Msg {
	return s.messages(t, events.StreamDLQ, events.DeadLetterSubject("gate-"+gate))
}

func hasAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
