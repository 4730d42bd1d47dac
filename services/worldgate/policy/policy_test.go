package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/gate/approval"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
	"github.com/worldgate/worldgate/services/worldgate/policy"
	"github.com/worldgate/worldgate/shared/actorpolicy"
	"github.com/worldgate/worldgate/shared/attest/attesttest"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
	"github.com/worldgate/worldgate/shared/slowtest"
)

// server is a real embedded NATS server running with every role's user, provisioned by the
// admin user.
type authServer struct {
	t     *testing.T
	url   string
	roles []natsauth.Role
}

func password(role string) string { return "pw-" + role }

func startServer(t *testing.T) *authServer {
	t.Helper()
	rs, err := policy.Roles(gates.Builtin(), route.Default(), "alice", "bob")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: t.TempDir(), Users: natsauth.Users(rs, password)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	s := &authServer{t: t, url: srv.ClientURL(), roles: rs}
	_, js := s.connect(natsauth.Admin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := natsx.Provision(ctx, js, natsx.DefaultTopology(natsx.TopologyOptions{}), logx.Discard()); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *authServer) connect(role string) (*nats.Conn, jetstream.JetStream) {
	s.t.Helper()
	nc, js, err := natsx.Connect(natsx.ConnConfig{URL: s.url, Name: s.t.Name() + "/" + role, User: role, Password: password(role)}, logx.Discard())
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(nc.Close)
	return nc, js
}

// violation publishes (or subscribes to) subject and returns the server's permissions
// violation for it, or nil if the server accepted it. The server answers a refused operation
// with -ERR before the PONG of the flush, and the client records it as its last error.
func violation(t *testing.T, nc *nats.Conn, op, subject string) error {
	t.Helper()
	var err error
	switch op {
	case "publish":
		err = nc.Publish(subject, []byte("{}"))
	case "subscribe":
		_, err = nc.SubscribeSync(subject)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", op, subject, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	last := nc.LastError()
	want := map[string]string{"publish": "publish to", "subscribe": "subscription to"}[op] + ` "` + strings.ToLower(subject) + `"`
	if last != nil && errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(strings.ToLower(last.Error()), want) {
		return last
	}
	return nil
}

func refused(t *testing.T, nc *nats.Conn, role string, subjects ...string) {
	t.Helper()
	for _, s := range subjects {
		if violation(t, nc, "publish", s) == nil {
			t.Errorf("%s published to %s: the server should refuse it", role, s)
		}
	}
}

// stored publishes to subject through JetStream and requires the stream's acknowledgement.
func stored(t *testing.T, js jetstream.JetStream, role, subject, stream string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := js.Publish(ctx, subject, []byte("{}"))
	if err != nil {
		t.Errorf("%s publishing to %s: %v", role, subject, err)
		return
	}
	if ack.Stream != stream {
		t.Errorf("%s publishing to %s: stored in %s, want %s", role, subject, ack.Stream, stream)
	}
}

func TestOnlyTheEventProcessorPublishesCommittedEvents(t *testing.T) {
	s := startServer(t)
	for _, r := range s.roles {
		nc, js := s.connect(r.Name)
		switch r.Name {
		case natsauth.EventProcessor, natsauth.Admin:
			stored(t, js, r.Name, events.CommittedSubject("Location.Created"), events.StreamCommitted)
		default:
			refused(t, nc, r.Name, events.CommittedSubject("Location.Created"), "world.committed.npc.removed")
		}
		switch r.Name {
		case natsauth.Publisher, natsauth.Edge, natsauth.Admin:
			stored(t, js, r.Name, events.Subject(events.PlayerMoved), events.StreamWorld)
		default:
			refused(t, nc, r.Name, events.Subject(events.PlayerMoved))
		}
		// Outcomes: committed and fallback only from the event-processor, refused and skipped
		// only from the ai-worker.
		committed, refusal := events.OutcomeSubject(events.OutcomeCommitted, "player:a"), events.OutcomeSubject(events.OutcomeRefused, "player:a")
		skip := events.OutcomeSubject(events.OutcomeSkipped, "player:a")
		switch r.Name {
		case natsauth.Admin:
			stored(t, js, r.Name, committed, events.StreamOutcomes)
		case natsauth.EventProcessor:
			stored(t, js, r.Name, committed, events.StreamOutcomes)
			refused(t, nc, r.Name, refusal, skip)
		case natsauth.AIWorker:
			stored(t, js, r.Name, refusal, events.StreamOutcomes)
			stored(t, js, r.Name, skip, events.StreamOutcomes)
			refused(t, nc, r.Name, committed)
		default:
			refused(t, nc, r.Name, committed, refusal, skip)
		}
		if r.Name != natsauth.Admin {
			// Nobody but the admin changes the topology.
			refused(t, nc, r.Name, "$JS.API.STREAM.CREATE.EXTRA", "$JS.API.STREAM.DELETE."+events.StreamCommitted,
				"$JS.API.STREAM.UPDATE."+events.StreamWorld, "$JS.API.STREAM.PURGE."+events.StreamProposals)
		}
	}
}

func TestPublisherPublishesWorldEventsOnly(t *testing.T) {
	s := startServer(t)
	nc, js := s.connect(natsauth.Publisher)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	env, err := events.NewEnvelope(events.PlayerMoved, "test", events.Actor{Kind: "player", ID: "player:ada"},
		events.PlayerMovedPayload{PlayerID: "player:ada", FromLocationID: "loc:a", ToLocationID: "loc:b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.Publish(ctx, js, env); err != nil {
		t.Fatalf("events.Publish as publisher: %v", err)
	}
	refused(t, nc, natsauth.Publisher, events.GateSubject(gates.Schema), events.EmitSubject(events.EmitterAmbience), events.EmitSubject(events.EmitterOperator), validated, events.RejectedSubject(gates.Schema),
		events.SubjectAuditProposals, events.DeadLetterSubject("x"), "$KV."+natsx.BucketApprovals+".p",
		"$JS.API.CONSUMER.MSG.NEXT."+events.StreamWorld+".ai-ambience")
	if violation(t, nc, "subscribe", events.SubjectWorldAll) == nil {
		t.Error("publisher subscribed to world events")
	}
	if violation(t, nc, "subscribe", "_INBOX.operator.>") == nil {
		t.Error("publisher subscribed to the operator's inbox")
	}
}

// The ai-worker proposes only on its agent roles' emitter subjects: never as the world loader,
// an operator or the narrator, and never straight to a gate.
func TestAIWorkerProposesOnlyOnItsRolesEmitterSubjects(t *testing.T) {
	s := startServer(t)
	nc, js := s.connect(natsauth.AIWorker)
	for _, r := range []string{events.EmitterAmbience, events.EmitterNPCDialogue, events.EmitterQuestPlanner, events.EmitterWorldRules} {
		stored(t, js, natsauth.AIWorker, events.EmitSubject(r), events.StreamProposals)
	}
	refused(t, nc, natsauth.AIWorker, events.EmitSubject(events.EmitterWorldLoader), events.EmitSubject(events.EmitterOperator),
		events.EmitSubject(events.EmitterNarrator), events.GateSubject(gates.Schema), events.SubjectDecisions, events.DecisionsSubject(natsauth.Operator))
	// A transient refusal (rate, audit, invariant) sends the proposal back on that gate's retry
	// subject, never straight to the gate.
	stored(t, js, natsauth.AIWorker, events.RetrySubject(gates.Rate), events.StreamProposals)
	stored(t, js, natsauth.AIWorker, events.DeadLetterSubject("ai-ambience"), events.StreamDLQ)
	refused(t, nc, natsauth.AIWorker, validated, events.CommittedSubject("Ambience.Generated"),
		events.GateSubject(gates.Safety), events.GateSubject(gates.Dedup), events.GateSubject(gates.Approval),
		events.GateSubject(gates.Invariant), events.GateSubject(gates.Rate), events.GateSubject(gates.Audit),
		"$KV."+natsx.BucketRetries+".k",
		events.RejectedSubject(gates.Schema), events.SubjectApproval, events.SubjectAuditProposals,
		events.Subject(events.PlayerMoved), "$KV."+natsx.BucketApprovals+".p", "$KV."+natsx.BucketRate+".k",
		"$JS.API.CONSUMER.MSG.NEXT.PROPOSALS.gate-schema", "$JS.ACK.PROPOSALS.event-processor.1.1.1.1.1.1")
	if violation(t, nc, "subscribe", events.SubjectCommittedAll) == nil {
		t.Error("ai-worker subscribed to committed events")
	}
	// The AI cache is its own to read and write.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, natsx.BucketAICache)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "ctx-hash", []byte("out")); err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "ctx-hash"); err != nil || string(e.Value()) != "out" {
		t.Fatalf("AI cache read back %v, %v", e, err)
	}
	// It follows the committed exit changes (world-rules' exits cache) through ordered
	// consumers of its own filtered to them: no other committed event, no other worker's durable.
	for _, subject := range aiworker.ExitChangeSubjects() {
		c, err := js.OrderedConsumer(ctx, events.StreamCommitted, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
		if err != nil {
			t.Fatalf("ai-worker following %s: %v", subject, err)
		}
		if _, err := c.Fetch(1, jetstream.FetchMaxWait(100*time.Millisecond)); err != nil {
			t.Fatalf("ai-worker pulling %s: %v", subject, err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := js.OrderedConsumer(short, events.StreamCommitted, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.CommittedSubject("PlayerMoved")}}); err == nil {
		t.Error("ai-worker followed committed moves")
	}
	if _, err := js.CreateOrUpdateConsumer(short, events.StreamCommitted, jetstream.ConsumerConfig{Durable: memory.Name,
		FilterSubject: aiworker.ExitChangeSubjects()[0]}); err == nil {
		t.Error("ai-worker re-filtered the memory-writer's durable")
	}
}

// hops computes, independently of the package, where gate g may forward: the next gate on
// every route that names it (each kind's, and the narrator's for the kinds a narrator may
// propose), or proposals.validated after the last.
func hops(g string) []string {
	r := route.Default()
	var out []string
	var routes [][]string
	for _, k := range r.Kinds() {
		gates, _ := r.For(k)
		routes = append(routes, gates)
		if events.EmitterMay(events.EmitterNarrator, k) {
			n, _ := r.ForEmitter(events.EmitterNarrator, k)
			routes = append(routes, n)
		}
	}
	for _, gates := range routes {
		for i := range gates {
			if gates[i] != g {
				continue
			}
			if i+1 < len(gates) {
				out = append(out, events.GateSubject(gates[i+1]))
			} else {
				out = append(out, events.SubjectValidatedEntry)
			}
		}
	}
	return out
}

// validated is a validated proposal's subject as a last gate publishes it (one actor's).
var validated = events.ValidatedSubject("player:policy-test")

// concrete is a subject to publish to for the hop h: validated for the validated proposals'
// entry (a wildcard in the permissions).
func concrete(h string) string {
	if h == events.SubjectValidatedEntry {
		return validated
	}
	return h
}

func TestEachGatePublishesOnlyToItsNextHops(t *testing.T) {
	s := startServer(t)
	for _, g := range gates.Builtin().Known() {
		role := natsauth.GateRole(g)
		nc, js := s.connect(role)
		next := hops(g)
		if len(next) == 0 {
			t.Fatalf("gate %s has no next hop on the default routes", g)
		}
		for _, h := range next {
			stored(t, js, role, concrete(h), events.StreamProposals)
		}
		stored(t, js, role, events.RejectedSubject(g), events.StreamProposals)
		stored(t, js, role, events.DeadLetterSubject("gate-"+g), events.StreamDLQ)
		// Retry tickets: its own, never another gate's.
		stored(t, js, role, "$KV."+natsx.BucketRetries+"."+g+".k", "KV_"+natsx.BucketRetries)
		for _, other := range gates.Builtin().Known() {
			if other != g {
				refused(t, nc, role, "$KV."+natsx.BucketRetries+"."+other+".k")
			}
		}
		var skips []string
		for _, other := range append(gates.Builtin().Known(), "validated") {
			subject := events.GateSubject(other)
			if other == "validated" {
				subject = events.SubjectValidatedEntry
			}
			if !slices.Contains(next, subject) {
				skips = append(skips, concrete(subject))
			}
		}
		for _, other := range gates.Builtin().Known() {
			if other != g {
				skips = append(skips, events.RejectedSubject(other), events.DeadLetterSubject("gate-"+other))
			}
		}
		refused(t, nc, role, skips...)
		refused(t, nc, role, events.CommittedSubject("Location.Created"), events.Subject(events.PlayerMoved), "$KV."+natsx.BucketAICache+".k")
		if g != gates.Audit {
			refused(t, nc, role, events.SubjectAuditProposals)
		}
		if g != gates.Approval {
			refused(t, nc, role, events.SubjectApproval, "$KV."+natsx.BucketApprovals+".p")
		}
	}
	// The names the issue gives: the schema gate cannot jump to audit or to validated.
	nc, _ := s.connect(natsauth.GateRole(gates.Schema))
	refused(t, nc, "gate-schema", events.GateSubject(gates.Audit), validated)
}

func TestWorldLoaderOnlyProposesWorldBuilding(t *testing.T) {
	s := startServer(t)
	nc, js := s.connect(natsauth.WorldLoader)
	stored(t, js, natsauth.WorldLoader, events.EmitSubject(events.EmitterWorldLoader), events.StreamProposals)
	refused(t, nc, natsauth.WorldLoader, events.EmitSubject(events.EmitterOperator), events.EmitSubject(events.EmitterAmbience),
		events.GateSubject(gates.Schema), validated, events.Subject(events.PlayerMoved))
}

// The gates user runs every gate in one process, fused (gate -gate all): it publishes what
// leaves the process (validated proposals, every gate's rejections, the hold notice, the audit
// record, and the audit gate's subject, where the approval gate forwards a person's decision)
// but not the hops between its gates, which no run publishes. gates-unfused (gate -fuse=false,
// for comparisons; not in deploy/nats) keeps them.
func TestGatesUserLacksTheHopsBetweenItsGates(t *testing.T) {
	s := startServer(t)
	nc, js := s.connect(natsauth.Gates)
	internal := []string{events.GateSubject(gates.Safety), events.GateSubject(gates.Invariant), events.GateSubject(gates.Dedup),
		events.GateSubject(gates.Replay), events.GateSubject(gates.Rate), events.GateSubject(gates.Approval)}
	var all []string
	for _, g := range gates.Builtin().Known() {
		all = append(all, hops(g)...)
		stored(t, js, natsauth.Gates, events.RejectedSubject(g), events.StreamProposals)
	}
	for _, h := range all {
		if !slices.Contains(internal, h) {
			stored(t, js, natsauth.Gates, concrete(h), events.StreamProposals)
		}
	}
	stored(t, js, natsauth.Gates, events.SubjectApproval, events.StreamProposals)
	stored(t, js, natsauth.Gates, events.SubjectAuditProposals, events.StreamAudit)
	refused(t, nc, natsauth.Gates, internal...)
	refused(t, nc, natsauth.Gates, events.GateSubject(gates.Schema), events.CommittedSubject("Location.Created"))

	unfused, err := policy.GateProcess(gates.Builtin(), route.Default(), gates.Builtin().OneProcess().Unfused()[0])
	if err != nil {
		t.Fatal(err)
	}
	if unfused.Name != "gates-unfused" {
		t.Fatalf("the unfused process's user is %s", unfused.Name)
	}
	for _, h := range all {
		if !slices.Contains(unfused.Permissions.Publish, h) {
			t.Errorf("gates-unfused may not publish to %s", h)
		}
	}
	if _, found := natsauth.Lookup(s.roles, unfused.Name); found {
		t.Error("gates-unfused is among the deployment's users (deploy/nats); only comparisons need it")
	}
}

// The fused process, as the gates user, moves proposals end to end: a move passes schema,
// invariant, rate and audit in one hop and another is rejected by the invariant gate, with
// nothing dead-lettered (a publish the server refused would be).
func TestFusedGatesRunAsTheGatesUser(t *testing.T) {
	s := startServer(t)
	graph := graphdtest.Start(t, graphdtest.InMemory())
	g := graphdtest.Writer(t, graph.URL())
	for _, tr := range []*gremlingo.GraphTraversal{
		g.AddV("Location").Property(gremlingo.T.Id, "loc:square").Property("name", "square").Property("version", int64(1)),
		g.AddV("Location").Property(gremlingo.T.Id, "loc:gate").Property("name", "gate").Property("version", int64(1)),
		g.V("loc:square").AddE("exit").To(gremlingo.T__.V("loc:gate")).Property("direction", "north"),
		g.AddV("Player").Property(gremlingo.T.Id, "player:ada").Property("name", "Ada"),
		g.V("player:ada").AddE("at").To(gremlingo.T__.V("loc:square")),
	} {
		if err := <-tr.Iterate(); err != nil {
			t.Fatal(err)
		}
	}
	reader, err := graphx.Open(graphx.Settings{ReadOnly: true, URL: graph.URL(), Username: graphdtest.ReaderUser, Password: graphdtest.ReaderPassword})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)

	nc, js := s.connect(natsauth.Gates)
	app, err := runtime.New(runtime.Options{Name: "gate", Conn: nc, JetStream: js, Registerer: prometheus.NewRegistry(), Logger: logx.Discard(), Retries: -1, CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := gates.Config{MaxDeliver: 2, Backoff: []time.Duration{20 * time.Millisecond}, Invariant: gates.InvariantConfig{ReferenceWait: -1}}
	if err := gates.Builtin().Register(context.Background(), app, gates.Deps{JetStream: js, Graph: reader, Signers: attesttest.New().Signers, Config: cfg,
		Registerer: prometheus.NewRegistry(), Logger: logx.Discard()}, []string{gates.Schema, gates.Invariant, gates.Rate, gates.Audit}); err != nil {
		t.Fatal(err)
	}
	runtimetest.Start(t, app)

	_, wjs := s.connect(natsauth.AIWorker)
	pending, _ := route.Default().For(events.KindPlayerMoved)
	for i, to := range map[string]string{"north": "loc:gate", "west": "loc:gate"} {
		payload, _ := json.Marshal(map[string]any{"playerId": "player:ada", "fromLocationId": "loc:square", "toLocationId": to, "direction": i})
		p := events.Proposal{ProposalID: "move-" + i, Kind: events.KindPlayerMoved, SchemaVersion: events.ProposalSchemaVersion, CorrelationID: "c-" + i,
			CausationID: "e-" + i, AgentRole: "world-rules", Actor: events.Actor{Kind: "player", ID: "player:ada"}, Payload: payload,
			Route: events.Route{Pending: pending}, CreatedUTC: time.Now().UTC()}
		data, _ := json.Marshal(p)
		if _, err := wjs.Publish(context.Background(), events.EmitSubject("world-rules"), data, jetstream.WithMsgID(p.ProposalID)); err != nil {
			t.Fatal(err)
		}
	}
	_, ajs := s.connect(natsauth.Admin)
	natstest.WaitFor(t, 15*time.Second, "the move validated and the other rejected by the invariant gate", func() bool {
		return natstest.StreamMsgs(t, ajs, events.StreamProposals, events.SubjectValidatedAll) == 1 &&
			natstest.StreamMsgs(t, ajs, events.StreamProposals, events.RejectedSubject(gates.Invariant)) == 1
	})
	if n := natstest.StreamMsgs(t, ajs, events.StreamDLQ, ">"); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	if n := natstest.StreamMsgs(t, ajs, events.StreamProposals, "proposals.gate.>"); n != 0 {
		t.Fatalf("%d hops between the process's own gates", n)
	}
}

func TestEventProcessorAndMCPWorld(t *testing.T) {
	s := startServer(t)
	nc, js := s.connect(natsauth.EventProcessor)
	stored(t, js, natsauth.EventProcessor, events.RejectedSubject("processor"), events.StreamProposals)
	refused(t, nc, natsauth.EventProcessor, validated, events.GateSubject(gates.Schema), events.RejectedSubject(gates.Audit))
	// Its partitions: created over the validated partitions only, paused and unpinned while a
	// replica gives one up; another worker's durable on the stream never.
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer pcancel()
	durable := runtime.PartitionDurable("event-processor", 3)
	if _, err := js.CreateOrUpdateConsumer(pctx, events.StreamProposals, jetstream.ConsumerConfig{Durable: durable,
		FilterSubject: events.ValidatedPartition(3), AckPolicy: jetstream.AckExplicitPolicy,
		PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"partition"}, PinnedTTL: time.Second}); err != nil {
		t.Fatalf("the event-processor creating its partition's durable: %v", err)
	}
	if _, err := js.PauseConsumer(pctx, events.StreamProposals, durable, time.Now().Add(time.Second)); err != nil {
		t.Fatalf("the event-processor pausing its partition: %v", err)
	}
	if _, err := js.ResumeConsumer(pctx, events.StreamProposals, durable); err != nil {
		t.Fatalf("the event-processor resuming its partition: %v", err)
	}
	refused(t, nc, natsauth.EventProcessor, "$JS.API.CONSUMER.PAUSE.PROPOSALS.gate-schema", "$JS.API.CONSUMER.UNPIN.PROPOSALS.gate-schema",
		"$JS.API.CONSUMER.CREATE.PROPOSALS.mine."+events.GateSubject(gates.Schema))

	_, ajs := s.connect(natsauth.Admin)
	stored(t, ajs, natsauth.Admin, events.CommittedSubject("Location.Created"), events.StreamCommitted)
	nc, js = s.connect(natsauth.MCPWorld)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := worldtools.RecentEvents(ctx, js, events.StreamCommitted, "loc:a", 5, 50); err != nil {
		t.Fatalf("mcp-world reading the committed log: %v", err)
	}
	refused(t, nc, natsauth.MCPWorld, "$JS.API.STREAM.INFO."+events.StreamProposals, "$JS.API.STREAM.MSG.GET."+events.StreamWorld,
		events.GateSubject(gates.Schema))
}

func TestOperatorDecidesButCannotStealWork(t *testing.T) {
	s := startServer(t)
	nc, js := s.connect(natsauth.Operator)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := approval.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.List(ctx); err != nil {
		t.Fatalf("operator listing held proposals: %v", err)
	}
	// The shared operator user decides nothing: a decision is a person's, on that person's own
	// subject. World building enters on the operator emitter's subject.
	if err := store.Request(ctx, approval.Decision{ProposalID: "p-x", Status: approval.StatusApproved, By: "alice"}); !errors.Is(err, approval.ErrNotAnApprover) && !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("operator requesting a decision: %v", err)
	}
	stored(t, js, natsauth.Operator, events.EmitSubject(events.EmitterOperator), events.StreamProposals)
	refused(t, nc, natsauth.Operator, events.SubjectDecisions, events.DecisionsSubject(natsauth.Operator), events.DecisionsSubject("alice"),
		events.DecisionsSubject("mallory"), events.GateSubject(gates.Schema),
		events.EmitSubject(events.EmitterWorldLoader), events.EmitSubject(events.EmitterAmbience), events.EmitSubject(events.EmitterNarrator))
	var moves []string
	for _, h := range hops(gates.Approval) {
		if h != events.SubjectValidatedEntry {
			moves = append(moves, h)
		}
	}
	refused(t, nc, natsauth.Operator, moves...)
	refused(t, nc, natsauth.Operator, events.RejectedSubject(gates.Approval), "$KV."+natsx.BucketApprovals+".p",
		events.RetrySubject(gates.Audit), "$JS.API.CONSUMER.MSG.NEXT.PROPOSALS."+gates.DecisionsDurable)
	refused(t, nc, natsauth.Operator, validated, events.RejectedSubject(gates.Schema), "$KV."+natsx.BucketRate+".k",
		"$JS.API.CONSUMER.MSG.NEXT.PROPOSALS.gate-schema", "$JS.API.CONSUMER.DELETE.PROPOSALS.event-processor",
		"$JS.API.CONSUMER.CREATE.WORLD.ai-ambience.world.events.player.moved")
	// Reading is allowed: stream information through JetStream.
	if _, err := js.Stream(ctx, events.StreamProposals); err != nil {
		t.Fatalf("operator reading stream information: %v", err)
	}
}

// Each approver decides on their own subject only, and may do nothing an operator may not:
// the approval gate takes the approver from the subject, so no one decides in another's name.
func TestEachApproverDecidesAsThemselvesOnly(t *testing.T) {
	s := startServer(t)
	alice := natsauth.ApproverRole("alice")
	nc, js := s.connect(alice)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := approval.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.List(ctx); err != nil {
		t.Fatalf("approver listing held proposals: %v", err)
	}
	stored(t, js, alice, events.DecisionsSubject("alice"), events.StreamProposals)
	refused(t, nc, alice, events.DecisionsSubject("bob"), events.DecisionsSubject(natsauth.Operator), events.SubjectDecisions,
		events.EmitSubject(events.EmitterOperator), events.GateSubject(gates.Schema), events.GateSubject(gates.Audit),
		validated, "$KV."+natsx.BucketApprovals+".p", "$KV."+natsx.BucketBudget+".x",
		events.RetrySubject(gates.Approval), "$JS.API.CONSUMER.MSG.NEXT.PROPOSALS."+gates.DecisionsDurable)
	if violation(t, nc, "subscribe", natsx.InboxPrefix(natsauth.ApproverRole("bob"))+".x") == nil {
		t.Error("alice subscribed to bob's inbox")
	}
	for _, bad := range []string{"", "Alice", "a.b", "a*", "1abc", strings.Repeat("a", 33)} {
		if _, err := policy.Roles(gates.Builtin(), route.Default(), bad); err == nil {
			t.Errorf("approver name %q accepted", bad)
		}
	}
	if _, err := policy.Roles(gates.Builtin(), route.Default(), "alice", "alice"); err == nil {
		t.Error("an approver named twice accepted")
	}
}

// Workers report the lag of the streams they consume (natsx.LagCollector lists their consumers).
func TestWorkersReadTheLagOfTheirStreams(t *testing.T) {
	s := startServer(t)
	for role, streams := range map[string][]string{
		natsauth.AIWorker:       {events.StreamWorld, events.StreamProposals},
		natsauth.Gates:          {events.StreamProposals},
		natsauth.EventProcessor: {events.StreamProposals},
	} {
		_, js := s.connect(role)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for _, name := range streams {
			st, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatalf("%s: stream %s: %v", role, name, err)
			}
			lister := st.ListConsumers(ctx)
			for range lister.Info() {
			}
			if err := lister.Err(); err != nil {
				t.Errorf("%s listing the consumers of %s: %v", role, name, err)
			}
		}
		cancel()
	}
}

// The approval gate holds a destructive proposal; an approver asks to approve it; the gate
// applies the decision and forwards the proposal to its next hop; the gate's expiry sweep
// lists the held proposals. Each as its own user.
func TestApprovalHeldByTheGateDecidedByTheOperator(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, gjs := s.connect(natsauth.GateRole(gates.Approval))
	gate, err := approval.Open(ctx, gjs)
	if err != nil {
		t.Fatal(err)
	}
	gate = gate.WithSigner(attesttest.New().Signers[gates.Approval])
	p := &events.Proposal{ProposalID: "p-remove-exit", Kind: events.KindExitRemoved, CorrelationID: "c-1",
		Route: events.Route{Pending: []string{gates.Approval, gates.Audit}}}
	if err := gate.Hold(ctx, p, 0); err != nil {
		t.Fatalf("approval gate holding a proposal: %v", err)
	}
	if n, err := gate.ExpireDue(ctx); err != nil || n != 0 {
		t.Fatalf("approval gate sweeping: %d, %v", n, err)
	}
	_, ojs := s.connect(natsauth.ApproverRole("alice"))
	op, err := approval.Open(ctx, ojs)
	if err != nil {
		t.Fatal(err)
	}
	held, err := op.List(ctx, approval.StatusPending)
	if err != nil || len(held) != 1 {
		t.Fatalf("operator listing held proposals: %v, %v", held, err)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	_, err = op.Approve(short, p.ProposalID, "tester") // refused by the server: the ack never comes
	cancelShort()
	if err == nil {
		t.Fatal("the approver wrote the decision into the approvals bucket itself")
	}
	d := approval.Decision{ProposalID: p.ProposalID, Status: approval.StatusApproved, By: "tester"}
	if err := op.Request(ctx, d); err != nil {
		t.Fatalf("approver requesting the approval: %v", err)
	}
	d.By = "alice" // what the gate's decisions handler takes from the subject
	// The approval gate's side (gates.Register's decisions handler): apply what was requested.
	if rec, err := gate.Apply(ctx, d); err != nil || rec.Status != approval.StatusApproved || !rec.Published {
		t.Fatalf("approval gate applying the decision: %+v, %v", rec, err)
	}
	if rec, err := op.Await(ctx, p.ProposalID); err != nil || rec.DecidedBy != "alice" {
		t.Fatalf("approver reading the decision back: %+v, %v", rec, err)
	}
	_, ajs := s.connect(natsauth.Admin)
	natstest.WaitFor(t, 5*time.Second, "the approved proposal at the audit gate", func() bool {
		return natstest.StreamMsgs(t, ajs, events.StreamProposals, events.GateSubject(gates.Audit)) == 1
	})
}

// A process running several gates publishes what each of them publishes, but fused (the
// default) not the hops from one of its gates to another: gates-schema-safety lacks
// proposals.gate.safety, its unfused counterpart has it.
func TestGateSetIsTheUnionOfItsGates(t *testing.T) {
	routes := route.Default()
	rs, err := policy.Roles(gates.Builtin(), routes)
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.GateSet(gates.Builtin(), routes, []string{gates.Schema, gates.Safety})
	if err != nil {
		t.Fatal(err)
	}
	unfused, err := policy.GateProcess(gates.Builtin(), routes, gates.Process{Gates: []string{gates.Schema, gates.Safety}, NoFusion: true})
	if err != nil {
		t.Fatal(err)
	}
	var union []string
	for _, g := range []string{gates.Schema, gates.Safety} {
		r, _ := natsauth.Lookup(rs, natsauth.GateRole(g))
		union = append(union, r.Permissions.Publish...)
	}
	slices.Sort(union)
	union = slices.Compact(union)
	if unfused.Name != "gates-schema-safety-unfused" || !slices.Equal(unfused.Permissions.Publish, union) {
		t.Fatalf("unfused gate set %s publishes %v; want the union %v", unfused.Name, unfused.Permissions.Publish, union)
	}
	fused := slices.DeleteFunc(slices.Clone(union), func(s string) bool { return s == events.GateSubject(gates.Safety) })
	if len(fused) != len(union)-1 || set.Name != "gates-schema-safety" || !slices.Equal(set.Permissions.Publish, fused) {
		t.Fatalf("gate set %s publishes %v; want the union without the hop to safety %v", set.Name, set.Permissions.Publish, fused)
	}
	if _, err := policy.GateSet(gates.Builtin(), routes, []string{gates.Schema, "vibes"}); err == nil || !strings.Contains(err.Error(), "vibes") {
		t.Fatalf("unknown gate in a set: %v", err)
	}
}

// A worker started with -provision against a server the admin provisioned only reads the
// topology, which its user may do.
func TestWorkersCheckAProvisionedTopology(t *testing.T) {
	s := startServer(t)
	for _, role := range []string{natsauth.AIWorker, natsauth.Gates, natsauth.GateRole(gates.Schema), natsauth.EventProcessor} {
		_, js := s.connect(role)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := natsx.Provision(ctx, js, natsx.DefaultTopology(natsx.TopologyOptions{}), logx.Discard()); err != nil {
			t.Errorf("%s checking the topology: %v", role, err)
		}
		cancel()
	}
}

// No role but the admin may subscribe to a stream's subjects: workers read through their pull
// consumers, into their own inboxes. This also keeps consumer-create rights from becoming
// publish rights: JetStream delivers a push consumer's messages only while a client
// subscribes to its deliver subject, so a worker that points its consumer at
// world.committed.<x> finds nobody there to make JetStream deliver.
func TestOnlyTheAdminSubscribesToStreamSubjects(t *testing.T) {
	s := startServer(t)
	var subjects []string
	for _, st := range natsx.DefaultTopology(natsx.TopologyOptions{}).Streams {
		subjects = append(subjects, st.Subjects...)
	}
	for _, r := range s.roles {
		if r.Name == natsauth.Admin {
			continue
		}
		nc, _ := s.connect(r.Name)
		for _, subject := range append(subjects, events.CommittedSubject("Location.Created"), "_INBOX.admin.x") {
			if violation(t, nc, "subscribe", subject) == nil {
				t.Errorf("%s subscribed to %s", r.Name, subject)
			}
		}
	}
}

// A worker whose topology differs from the provisioned one may not change it, and is told why.
func TestWorkersCannotChangeTheTopology(t *testing.T) {
	s := startServer(t)
	_, js := s.connect(natsauth.Gates)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := natsx.Provision(ctx, js, natsx.DefaultTopology(natsx.TopologyOptions{Limits: map[string]natsx.Limits{events.StreamWorld: {MaxAge: time.Hour}}}), logx.Discard())
	if err == nil || !strings.Contains(err.Error(), "may not change the topology") || !strings.Contains(err.Error(), "$JS.API.STREAM.UPDATE.") {
		t.Fatalf("gates user changing the topology: %v; want a refusal that names the API and the admin user", err)
	}
}

// mcp-propose's user proposes only as the narrator and enqueues only the content-request world
// events; it reads outcomes; it cannot publish anywhere else: another emitter's subject, a
// gate's, the validated or committed subjects, an outcome, a move.
func TestMCPProposePublishesOnlyAsTheNarrator(t *testing.T) {
	s := startServer(t)
	nc, js := s.connect(natsauth.MCPPropose)
	stored(t, js, natsauth.MCPPropose, events.EmitSubject(events.EmitterNarrator), events.StreamProposals)
	for _, typ := range events.NarratorEventTypes() {
		stored(t, js, natsauth.MCPPropose, events.Subject(typ), events.StreamWorld)
	}
	var others []string
	for _, e := range events.Emitters() {
		if e != events.EmitterNarrator {
			others = append(others, events.EmitSubject(e))
		}
	}
	for _, g := range gates.Builtin().Known() {
		others = append(others, events.GateSubject(g), events.RejectedSubject(g), events.RetrySubject(g))
	}
	refused(t, nc, natsauth.MCPPropose, others...)
	refused(t, nc, natsauth.MCPPropose, validated, events.SubjectApproval, events.DecisionsSubject(natsauth.Operator),
		events.CommittedSubject("NPCDialogueAccepted"), events.SubjectAuditProposals,
		events.Subject(events.PlayerMoved), events.Subject(events.PlayerMoveRequested),
		events.OutcomeSubject(events.OutcomeCommitted, "agent:x"), events.OutcomeSubject(events.OutcomeRefused, "agent:x"),
		"$KV."+natsx.BucketRate+".k", "$KV."+natsx.BucketAICache+".k", "$JS.API.STREAM.PURGE."+events.StreamProposals)
	// It reads outcomes (its status tool).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w, err := events.Watch(ctx, js, events.WatchOptions{FromStart: true})
	if err != nil {
		t.Fatalf("mcp-propose watching outcomes: %v", err)
	}
	w.Close()
}

// The rate gate follows repeat offenders' policies with a watch of their keys in the budget
// control bucket; it can neither watch the bucket's other keys (the budgets and their
// overrides) nor write a policy.
func TestRateGateWatchesOnlyActorPolicies(t *testing.T) {
	slowtest.Skip(t, "slow (a refused watch waits out its request's timeout)")
	s := startServer(t)
	_, adminJS := s.connect(natsauth.Admin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adminControl, err := adminJS.KeyValue(ctx, natsx.BucketBudget)
	if err != nil {
		t.Fatal(err)
	}
	if err := actorpolicy.Set(ctx, adminControl, actorpolicy.Policy{Actor: "player:ada", Multiplier: 0.5}); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{natsauth.GateRole(gates.Rate), natsauth.Gates} {
		nc, js := s.connect(role)
		control, err := js.KeyValue(ctx, natsx.BucketBudget)
		if err != nil {
			t.Fatal(err)
		}
		w, err := actorpolicy.StartWatch(ctx, control, logx.Discard())
		if err != nil {
			t.Fatalf("%s watching actor policies: %v", role, err)
		}
		if p := w.Get("player:ada"); p == nil || p.Multiplier != 0.5 {
			t.Errorf("%s: ada's policy %+v", role, p)
		}
		for _, keys := range []string{"def.>", ">"} {
			wctx, wcancel := context.WithTimeout(context.Background(), time.Second)
			if _, err := control.Watch(wctx, keys); err == nil {
				t.Errorf("%s watched the control bucket's keys %s", role, keys)
			}
			wcancel()
		}
		refused(t, nc, role, "$KV."+natsx.BucketBudget+".actor.x")
	}
	// A rate gate whose NATS user may not watch the policies (permissions from before the
	// watch) stops at start with the server's refusal, not after waiting for an answer.
	_, js := s.connect(natsauth.GateRole(gates.Schema))
	spec, _ := gates.Builtin().Lookup(gates.Rate)
	started := time.Now()
	_, err = spec.New(context.Background(), gates.Deps{JetStream: js, Logger: logx.Discard(), Now: time.Now})
	if err == nil || !errors.Is(err, nats.ErrPermissionViolation) || time.Since(started) > 30*time.Second {
		t.Fatalf("a rate gate that may not watch the policies: %v after %s", err, time.Since(started).Round(time.Second))
	}
}

// The ai-worker reads the operators' budget controls but cannot change them (issue 38: it
// resumed the operator's kill switch), and it cannot delete anyone's consumer on COMMITTED
// (it deleted consumers it did not create). Its own records — definitions, offences, the actor
// policies strikes set — it still writes, and its ledger still watches every control key.
func TestAIWorkerCannotTouchTheOperatorsControls(t *testing.T) {
	s := startServer(t)
	_, adminJS := s.connect(natsauth.Admin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adminControl, err := adminJS.KeyValue(ctx, natsx.BucketBudget)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adminControl.Put(ctx, "def.global", []byte(`{"name":"global"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := budget.Apply(ctx, adminControl, "global", budget.Change{Pause: true, By: "ops"}); err != nil {
		t.Fatal(err)
	}
	nc, js := s.connect(natsauth.AIWorker)
	refused(t, nc, natsauth.AIWorker, "$KV."+natsx.BucketBudget+".ctl.global", "$KV."+natsx.BucketBudget+".ctl.x",
		"$JS.API.CONSUMER.DELETE."+events.StreamCommitted+".someone-else", "$JS.API.CONSUMER.DELETE."+events.StreamCommitted+"."+memory.Name)
	control, err := js.KeyValue(ctx, natsx.BucketBudget)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"def.global", "offence.abc", "actor.abc"} {
		if _, err := control.Put(ctx, key, []byte(`{}`)); err != nil {
			t.Errorf("ai-worker writing its own control key %s: %v", key, err)
		}
	}
	// The attack itself: resuming the kill switch through the operators' own code path.
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if _, err := budget.Apply(short, control, "global", budget.Change{Resume: true, By: "ai-worker"}); err == nil {
		t.Error("ai-worker resumed the operator's paused budget")
	}
	w, err := control.WatchAll(ctx)
	if err != nil {
		t.Fatalf("ai-worker watching the control keys: %v", err)
	}
	defer func() {
		if err := w.Stop(); err != nil {
			t.Error(err)
		}
	}()
	sawPause := false
	for e := range w.Updates() {
		if e == nil {
			break // the current values are loaded
		}
		sawPause = sawPause || e.Key() == "ctl.global"
	}
	if !sawPause {
		t.Error("ai-worker's watch missed the operator's pause")
	}
	if e, err := adminControl.Get(ctx, "ctl.global"); err != nil || !strings.Contains(string(e.Value()), "paused") {
		t.Fatalf("the operator's pause after the ai-worker's attempts: %v %v", e, err)
	}
}

// The dedup gate, as its own user gate-dedup (one process per gate), reads the rejections with
// its own durable consumer: a refusal the event-processor publishes at commit, as its user,
// makes the gate forget the refused content, so similar content passes next.
func TestDedupGateForgetsWhatTheEventProcessorRefusesAsItsOwnUser(t *testing.T) {
	s := startServer(t)
	nc, js := s.connect(natsauth.GateRole(gates.Dedup))
	app, err := runtime.New(runtime.Options{Name: "gate", Conn: nc, JetStream: js, Registerer: prometheus.NewRegistry(), Logger: logx.Discard(), Retries: -1, CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := gates.Config{MaxDeliver: 2, Backoff: []time.Duration{20 * time.Millisecond}}
	if err := gates.Builtin().Register(context.Background(), app, gates.Deps{JetStream: js, Signers: attesttest.New().Signers, Config: cfg,
		Registerer: prometheus.NewRegistry(), Logger: logx.Discard()}, []string{gates.Dedup}); err != nil {
		t.Fatal(err)
	}
	runtimetest.Start(t, app)

	_, before := s.connect(natsauth.GateRole(gates.Invariant)) // the gate before dedup
	_, ep := s.connect(natsauth.EventProcessor)
	_, ajs := s.connect(natsauth.Admin)
	ctx := context.Background()
	propose := func(id string) *events.Proposal {
		t.Helper()
		payload, _ := json.Marshal(map[string]any{"locationId": "loc:square", "text": "Rain drums on the slate roofs of the square, and gulls argue over bread.", "mood": "calm"})
		p := &events.Proposal{ProposalID: id, Kind: events.KindAmbience, SchemaVersion: events.ProposalSchemaVersion, CorrelationID: "c-" + id,
			CausationID: "e-" + id, AgentRole: "ambience", Actor: events.Actor{Kind: "player", ID: "player:ada"}, Payload: payload,
			Route: events.Route{Pending: []string{gates.Dedup, gates.Replay, gates.Rate, gates.Audit}}, CreatedUTC: time.Now().UTC()}
		data, _ := json.Marshal(p)
		if _, err := before.Publish(ctx, events.GateSubject(gates.Dedup), data, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	passed := func(n uint64) func() bool {
		return func() bool {
			return natstest.StreamMsgs(t, ajs, events.StreamProposals, events.GateSubject(gates.Replay)) == n
		}
	}
	first := propose("first")
	natstest.WaitFor(t, 10*time.Second, "the first proposal passed the dedup gate", passed(1))
	rej := events.Rejection{ProposalID: first.ProposalID, Kind: first.Kind, Gate: "processor", Code: events.CodeCommitConflict,
		Reason: "Refused at commit.", CorrelationID: first.CorrelationID, RejectedUTC: time.Now().UTC(), Proposal: first}
	data, _ := json.Marshal(rej)
	if _, err := ep.Publish(ctx, events.RejectedSubject("processor"), data); err != nil {
		t.Fatal(err)
	}
	c, err := ajs.Consumer(ctx, events.StreamProposals, gates.DedupRejectionsDurable)
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 10*time.Second, "the dedup gate read the rejection", func() bool {
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	propose("again")
	natstest.WaitFor(t, 10*time.Second, "the similar proposal passed the dedup gate", passed(2))
	if n := natstest.StreamMsgs(t, ajs, events.StreamProposals, events.RejectedSubject(gates.Dedup)); n != 0 {
		t.Fatalf("%d refusals by the dedup gate, want none", n)
	}
	if n := natstest.StreamMsgs(t, ajs, events.StreamDLQ, ">"); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}
