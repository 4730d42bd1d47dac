package aiworker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/ai-worker/agent"
	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/ai-worker/llmsetup"
	"github.com/worldgate/worldgate/services/ai-worker/scripted"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/shared/attest/attesttest"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
)

const token = "ai-worker-test-token-0001"

var __ = gremlingo.T__

// seedWorld writes a small world through gremlin-go as the graph's writer (docs/graph-model.md).
func seedWorld(t testing.TB, url string) {
	t.Helper()
	g := graphdtest.Writer(t, url)
	must := func(tr *gremlingo.GraphTraversal) {
		t.Helper()
		if err := <-tr.Iterate(); err != nil {
			t.Fatal(err)
		}
	}
	for i, l := range []struct{ id, name, desc string }{
		{"loc:square", "Market Square", "Stalls crowd the cobbles around a dry fountain."},
		{"loc:gate", "North Gate", "A weathered gate with a sleepy guard."},
		{"loc:tavern", "The Gilded Goose", "A warm, loud tavern that smells of ale and woodsmoke."},
	} {
		must(g.AddV("Location").Property(gremlingo.T.Id, l.id).Property("name", l.name).Property("description", l.desc).
			Property("region", "riverlands").Property("tags", []any{"town"}).Property("version", int64(i+1)))
	}
	for _, e := range []struct{ from, to, dir string }{
		{"loc:square", "loc:gate", "north"}, {"loc:gate", "loc:square", "south"},
		{"loc:square", "loc:tavern", "east"}, {"loc:tavern", "loc:square", "west"},
	} {
		must(g.V(e.from).AddE("exit").To(__.V(e.to)).Property("direction", e.dir).Property("description", "a path "+e.dir))
	}
	must(g.AddV("NPC").Property(gremlingo.T.Id, "npc:mira").Property("name", "Mira").Property("persona", "a cheerful fruit seller").
		Property("mood", "cheerful").Property("version", int64(1)))
	must(g.AddV("Player").Property(gremlingo.T.Id, "player:ada").Property("name", "Ada").Property("version", int64(3)))
	must(g.V("npc:mira").AddE("at").To(__.V("loc:square")))
	must(g.V("player:ada").AddE("at").To(__.V("loc:square")))
}

var loreFacts = []loretools.Fact{
	{ID: "lore:fountain", Title: "The Dry Fountain", Text: "The fountain in the Market Square ran dry the winter the old duke died.", Tags: []string{"square"}, Canonical: true, About: []string{"loc:square"}},
	{ID: "lore:goose", Title: "The Gilded Goose", Text: "The Gilded Goose tavern has stood by the square for two hundred years.", Tags: []string{"tavern"}, Canonical: true, About: []string{"loc:tavern"}},
}

// stack is the embedded world: NATS with the topology, graphd, the three MCP servers over
// Streamable HTTP, an MCP client, the scripted provider behind the llm registry, and the
// ai-worker's handlers on a runtime app.
type stack struct {
	t       testing.TB
	nats    *natstest.Env
	reg     *prometheus.Registry
	world   *httptest.Server
	mcp     *client.Client
	llm     *llm.Registry
	worker  *aiworker.Worker
	stopApp func()
	// toolCalls counts tools/call requests that reached the world and lore servers.
	toolCalls atomic.Int64
	deps      aiworker.Deps
	// keys are the gates' keys; the worker's keyring accepts them.
	keys *attesttest.Keys
}

type stackOpts struct {
	scripted scripted.Options
	noApp    bool
	// provider, when set, replaces the scripted provider on every tier (model "test-model").
	provider llm.Provider
	// slowTools delays every tools/call the world and lore servers answer.
	slowTools time.Duration
}

// countToolCalls counts the tools/call requests h serves (each delayed by slow).
func (s *stack) countToolCalls(h http.Handler, slow time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"method":"tools/call"`) {
				s.toolCalls.Add(1)
				time.Sleep(slow)
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		h.ServeHTTP(w, r)
	})
}

func startStack(t testing.TB, o stackOpts) *stack {
	t.Helper()
	s := &stack{t: t, nats: natstest.Start(t), reg: prometheus.NewRegistry(), keys: attesttest.New()}
	gs := graphdtest.Start(t, graphdtest.InMemory())
	seedWorld(t, gs.URL())
	auth := mcpx.Options{Auth: mcpx.AuthConfig{StaticTokens: map[string]mcpx.Principal{
		token: {Subject: "ai-worker", Scopes: []string{mcpx.ScopeWorldRead, mcpx.ScopeLoreRead, mcpx.ScopeClassifyRead}}}}}
	world, err := worldtools.New(worldtools.Options{Options: auth, JetStream: s.nats.JS,
		Graph: graphx.Settings{ReadOnly: true, URL: gs.URL(), Username: graphdtest.ReaderUser, Password: graphdtest.ReaderPassword}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(world.Close)
	lore, err := loretools.New(loretools.Options{Options: auth, Facts: loreFacts})
	if err != nil {
		t.Fatal(err)
	}
	classify, err := classifytools.New(classifytools.Options{Options: auth})
	if err != nil {
		t.Fatal(err)
	}
	s.world = httptest.NewServer(s.countToolCalls(world.Handler(), o.slowTools))
	loreSrv := httptest.NewServer(s.countToolCalls(lore.Handler(), o.slowTools))
	classifySrv := httptest.NewServer(classify.Handler())
	t.Cleanup(s.world.Close)
	t.Cleanup(loreSrv.Close)
	t.Cleanup(classifySrv.Close)
	s.mcp, err = client.New(context.Background(), client.Config{Servers: []client.ServerConfig{
		{Name: "world", URL: s.world.URL, Token: token, Timeout: 5 * time.Second},
		{Name: "lore", URL: loreSrv.URL, Token: token, Timeout: 5 * time.Second},
		{Name: "classify", URL: classifySrv.URL, Token: token, Timeout: 5 * time.Second},
	}, ReconnectBackoff: 50 * time.Millisecond, Logger: logx.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.mcp.Close() })
	cfg := llmsetup.DefaultConfig()
	cfg.Retry = llm.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	var provider llm.Provider = scripted.New(o.scripted)
	if o.provider != nil {
		provider = o.provider
		for tier := range cfg.Tiers {
			cfg.Tiers[tier] = []string{o.provider.Name() + ":test-model"}
		}
	}
	s.llm, err = llm.NewRegistry(cfg, llm.WithProviders(provider), llm.WithMetrics(s.reg), llm.WithLogger(logx.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	kv := s.nats.KeyValue(t, natsx.BucketAICache)
	s.deps = aiworker.Deps{LLM: s.llm, Tools: s.mcp, KV: kv, Keyring: s.keys.Ring, Registerer: s.reg, Logger: logx.Discard(),
		RejectionBackoff: []time.Duration{100 * time.Millisecond}}
	if o.noApp {
		s.worker, err = aiworker.New(s.deps)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s.stopApp = s.startWorker(s.deps)
	return s
}

// startWorker runs another ai-worker with deps on the stack's NATS; the returned stop (also
// run at the test's end) may be called more than once.
func (s *stack) startWorker(deps aiworker.Deps) func() {
	t := s.t
	t.Helper()
	app, err := runtime.New(runtime.Options{Name: "ai-worker", Conn: s.nats.Conn, JetStream: s.nats.JS, Registerer: deps.Registerer,
		Logger: logx.Discard(), CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := aiworker.Register(app, deps); err != nil {
		t.Fatal(err)
	}
	return runtimetest.Start(t, app)
}

// publish publishes a world event with a fresh event id and idempotency key.
func (s *stack) publish(eventType string, payload any) *events.Envelope {
	s.t.Helper()
	return s.publishAs("player:ada", eventType, payload)
}

// publishAs is publish with player as the actor.
func (s *stack) publishAs(player, eventType string, payload any) *events.Envelope {
	s.t.Helper()
	env, err := events.NewEnvelope(eventType, "test", events.Actor{Kind: "player", ID: player}, payload)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := events.Publish(context.Background(), s.nats.JS, env); err != nil {
		s.t.Fatal(err)
	}
	return env
}

type stored struct {
	p      *events.Proposal
	msgID  string
	stored time.Time
}

// proposals returns the proposals stored on subject, in stream order.
func (s *stack) proposals(subject string) []stored {
	s.t.Helper()
	ctx := context.Background()
	st, err := s.nats.JS.Stream(ctx, events.StreamProposals)
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []stored
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil || !subjectMatches(subject, m.Subject) {
			continue
		}
		p, err := events.DecodeProposal(m.Data)
		if err != nil {
			s.t.Fatalf("stored proposal on %s is invalid: %v\n%s", m.Subject, err, m.Data)
		}
		out = append(out, stored{p: p, msgID: m.Header.Get(events.HeaderMsgID), stored: m.Time})
	}
	return out
}

func subjectMatches(filter, subject string) bool {
	if strings.HasSuffix(filter, ".>") {
		return strings.HasPrefix(subject, strings.TrimSuffix(filter, ">"))
	}
	return filter == subject
}

// waitProposals waits until subject holds n proposals and returns them.
func (s *stack) waitProposals(subject string, n int) []stored {
	s.t.Helper()
	var got []stored
	natstest.WaitFor(s.t, 20*time.Second, fmt.Sprintf("%d proposals on %s", n, subject), func() bool {
		got = s.proposals(subject)
		return len(got) >= n
	})
	return got
}

// settled reports whether a durable consumer has processed everything it was given.
func (s *stack) settled(stream, durable string) func() bool {
	return func() bool {
		c, err := s.nats.JS.Consumer(context.Background(), stream, durable)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.AckFloor.Stream > 0
	}
}

// reject publishes a gate's rejection of p, as the gate service would: the gates of the route
// before it passed p and signed their hops (the schema gate attesting p's role), the gate
// recorded and signed its own refusal. Gate agent.CommitGate is the event-processor's refusal
// of p after the whole route.
func (s *stack) reject(p *events.Proposal, gate string, code events.Code, transient bool, retryAfter float64) *events.Rejection {
	s.t.Helper()
	rej := &events.Rejection{ProposalID: p.ProposalID, Kind: p.Kind, Gate: gate, Code: code,
		Reason: "the line reads as " + strings.ToLower(string(code)) + " to the " + gate + " gate", Transient: transient, RetryAfter: retryAfter,
		CorrelationID: p.CorrelationID, AgentRole: p.AgentRole, Attempt: p.Attempt, RejectedUTC: time.Now().UTC(), Proposal: s.refusedAt(p, gate)}
	s.publishRejection(events.RejectedSubject(gate), rej, p.ProposalID+":rejected:"+gate)
	return rej
}

// refusedAt is p as it reaches gate's refusal through honest gates: the hops of the route's
// gates before gate passed and signed, then gate's rejected hop, signed.
func (s *stack) refusedAt(p *events.Proposal, gate string) *events.Proposal {
	s.t.Helper()
	full, err := route.Default().For(p.Kind)
	if err != nil {
		s.t.Fatal(err)
	}
	k := len(full)
	if gate != agent.CommitGate {
		if k = slices.Index(full, gate); k < 0 {
			s.t.Fatalf("the %s gate is not on the %s route %v", gate, p.Kind, full)
		}
	}
	q := *p
	q.Route = events.Route{Trail: slices.Clone(p.Route.Trail)}
	sign := func(g, outcome string) {
		h := events.Hop{Gate: g, Outcome: outcome, At: time.Now().UTC()}
		if g == events.GateSchema && outcome == events.OutcomePassed {
			h.Emitter = p.AgentRole
		}
		q.Route.Trail = append(q.Route.Trail, h)
		if err := s.keys.Signers[g].SignLast(&q); err != nil {
			s.t.Fatal(err)
		}
	}
	if len(q.Route.Trail) == 0 {
		for _, g := range full[:k] {
			sign(g, events.OutcomePassed)
		}
	}
	if gate != agent.CommitGate {
		sign(gate, events.OutcomeRejected)
	}
	q.Route.Pending = full[k:]
	return &q
}

// publishRejection publishes rej on subject with message id msgID.
func (s *stack) publishRejection(subject string, rej *events.Rejection, msgID string) {
	s.t.Helper()
	raw, err := json.Marshal(rej)
	if err != nil {
		s.t.Fatal(err)
	}
	msg := &nats.Msg{Subject: subject, Data: raw, Header: nats.Header{}}
	msg.Header.Set(events.HeaderCorrelationID, rej.CorrelationID)
	if _, err := s.nats.JS.PublishMsg(context.Background(), msg, jetstream.WithMsgID(msgID)); err != nil {
		s.t.Fatal(err)
	}
}
