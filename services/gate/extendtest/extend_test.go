// Package extendtest shows, and holds, what adding a gate takes: one Spec defined on the
// registry the gates run from (gates.Registry.Define), its place in the routes, and nothing
// else. The test-only gate below runs on
// the embedded stack (NATS JetStream with the generated per-process users, graphd, the other
// gates and the event-processor), under its own NATS user and signing key, both generated
// from the registry like every built-in gate's.
package extendtest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/worldgate/policy"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
)

// curfew is the test-only gate: nobody moves into the vault.
type curfew struct{}

const curfewGate = "curfew"

func (curfew) Name() string { return curfewGate }

func (curfew) Check(_ context.Context, p *events.Proposal) (gates.Decision, error) {
	var m events.PlayerMovedPayload
	if err := json.Unmarshal(p.Payload, &m); err != nil {
		return gates.Reject(events.CodeSchemaInvalid, "The move cannot be read: "+err.Error(), nil), nil
	}
	if m.ToLocationID == "loc:vault" {
		return gates.Reject(events.CodeInvariantViolation, "The vault is closed at night: nobody may enter it.", map[string]any{"location": m.ToLocationID}), nil
	}
	return gates.Pass(), nil
}

// registry is the built-in gates and the curfew gate, defined on it with the one
// registration line.
func registry(t *testing.T) *gates.Registry {
	t.Helper()
	reg := gates.Builtin()
	if err := reg.Define(gates.Spec{Name: curfewGate, Summary: "nobody enters the vault",
		New: func(context.Context, gates.Deps) (gates.Gate, error) { return curfew{}, nil }}); err != nil {
		t.Fatal(err)
	}
	return reg
}

// routesWithCurfew are the default routes with the curfew gate after invariant on player_moved
// (its place in routes.yaml).
func routesWithCurfew(t *testing.T, reg *gates.Registry) events.Routes {
	def := route.Default()
	byKind := map[string][]string{}
	for _, k := range def.Kinds() {
		byKind[k], _ = def.For(k)
	}
	byKind[events.KindPlayerMoved] = []string{gates.Schema, gates.Invariant, curfewGate, gates.Rate, gates.Audit}
	r := events.NewRoutes(byKind)
	if err := r.Validate(reg.Known()); err != nil {
		t.Fatal(err)
	}
	return r
}

func password(role string) string { return "pw-" + role }

func TestATestOnlyGateRunsLikeTheOthers(t *testing.T) {
	reg := registry(t)
	routes := routesWithCurfew(t, reg)

	// Its NATS user comes from the registry and the routes, like every gate's.
	roles, err := policy.Roles(reg, routes)
	if err != nil {
		t.Fatal(err)
	}
	user := gates.Process{Gates: []string{curfewGate}}.User()
	role, ok := natsauth.Lookup(roles, user)
	if !ok {
		t.Fatalf("no NATS user %s for the curfew gate among %d roles", user, len(roles))
	}
	for _, s := range []string{events.GateSubject(gates.Rate), events.RejectedSubject(curfewGate)} {
		if !slices.Contains(role.Permissions.Publish, s) {
			t.Errorf("%s may not publish to %s: %v", user, s, role.Permissions.Publish)
		}
	}
	if slices.Contains(role.Permissions.Publish, events.SubjectValidatedEntry) {
		t.Errorf("%s may publish to %s, though it is not the last gate of any route", user, events.SubjectValidatedEntry)
	}
	all, _ := natsauth.Lookup(roles, natsauth.Gates)
	if !slices.Contains(all.Permissions.Publish, events.RejectedSubject(curfewGate)) {
		t.Errorf("the all-gates user lacks the curfew gate's rejections")
	}

	// Its signing key, like every gate's.
	signers, ring, err := attest.Ensure(t.TempDir(), reg.Known())
	if err != nil {
		t.Fatal(err)
	}
	if signers[curfewGate] == nil {
		t.Fatal("no signing key for the curfew gate")
	}

	srv, err := natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: t.TempDir(), Users: natsauth.Users(roles, password)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	connect := func(role string) jetstream.JetStream {
		nc, js, err := natsx.Connect(natsx.ConnConfig{URL: srv.ClientURL(), Name: t.Name() + "/" + role, User: role, Password: password(role)}, logx.Discard())
		if err != nil {
			t.Fatalf("connect as %s: %v", role, err)
		}
		t.Cleanup(nc.Close)
		return js
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := natsx.Provision(ctx, connect(natsauth.Admin), natsx.DefaultTopology(natsx.TopologyOptions{}), logx.Discard()); err != nil {
		t.Fatal(err)
	}

	graph := graphdtest.Start(t, graphdtest.InMemory())
	seed(t, graph.URL())
	reader, err := graphx.Open(graphx.Settings{ReadOnly: true, URL: graph.URL(), Username: graphdtest.ReaderUser, Password: graphdtest.ReaderPassword})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	writer, err := graphx.Open(graphx.Settings{URL: graph.URL(), Username: graphdtest.WriterUser, Password: graphdtest.WriterPassword})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(writer.Close)

	run := func(name string, js jetstream.JetStream, register func(*runtime.App) error) {
		app, err := runtime.New(runtime.Options{Name: name, Conn: js.Conn(), JetStream: js, Registerer: prometheus.NewRegistry(), Logger: logx.Discard(), CloseTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := register(app); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		runtimetest.Start(t, app)
	}
	// The gates of player_moved's route, each in its own process under its own user.
	moves, _ := routes.For(events.KindPlayerMoved)
	for _, proc := range reg.OneProcessPerGate() {
		if !slices.Contains(moves, proc.Gates[0]) {
			continue
		}
		js := connect(proc.User())
		run(proc.User(), js, func(app *runtime.App) error {
			return reg.Register(ctx, app, gates.Deps{JetStream: js, Graph: reader, Routes: &routes, Signers: signers,
				Config:     gates.Config{MaxDeliver: 3, Backoff: []time.Duration{20 * time.Millisecond}, Invariant: gates.InvariantConfig{ReferenceWait: -1}},
				Registerer: prometheus.NewRegistry(), Logger: logx.Discard()}, proc.Gates)
		})
	}
	pjs := connect(natsauth.EventProcessor)
	run("event-processor", pjs, func(app *runtime.App) error {
		_, err := processor.Register(app, processor.Deps{Graph: writer, Keyring: ring, Routes: &routes, Registerer: prometheus.NewRegistry(), Logger: logx.Discard()})
		return err
	})

	// The world-rules agent proposes two moves, on its emitter subject, as the ai-worker.
	emitter := connect(natsauth.AIWorker)
	propose := func(id, to, dir string) {
		payload, _ := json.Marshal(events.PlayerMovedPayload{PlayerID: "player:ada", FromLocationID: "loc:square", ToLocationID: to, Direction: dir})
		p := events.Proposal{ProposalID: id, Kind: events.KindPlayerMoved, SchemaVersion: events.ProposalSchemaVersion, CorrelationID: "corr-" + id,
			CausationID: "cause-" + id, AgentRole: events.EmitterWorldRules, Actor: events.Actor{Kind: "player", ID: "player:ada"}, Payload: payload,
			Route: events.Route{Pending: moves}, CreatedUTC: time.Now().UTC()}
		data, _ := json.Marshal(p)
		if _, err := emitter.Publish(ctx, events.EmitSubject(events.EmitterWorldRules), data, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	propose("move-vault", "loc:vault", "down")
	propose("move-market", "loc:market", "east")

	admin := connect(natsauth.Admin)
	var committed events.DomainEvent
	natstest.WaitFor(t, 30*time.Second, "the move to the market committed", func() bool {
		m, err := admin.Stream(ctx, events.StreamCommitted)
		if err != nil {
			return false
		}
		msg, err := m.GetLastMsgForSubject(ctx, events.SubjectCommittedAll)
		return err == nil && json.Unmarshal(msg.Data, &committed) == nil && committed.ProposalID == "move-market"
	})
	var rej events.Rejection
	natstest.WaitFor(t, 30*time.Second, "the move to the vault refused by the curfew gate", func() bool {
		s, err := admin.Stream(ctx, events.StreamProposals)
		if err != nil {
			return false
		}
		msg, err := s.GetLastMsgForSubject(ctx, events.RejectedSubject(curfewGate))
		return err == nil && json.Unmarshal(msg.Data, &rej) == nil
	})
	if rej.ProposalID != "move-vault" || rej.Gate != curfewGate || rej.Code != events.CodeInvariantViolation {
		t.Fatalf("rejection = %s by %s (%s): %s", rej.ProposalID, rej.Gate, rej.Code, rej.Reason)
	}
	// The committed move passed every gate of its configured route, the curfew gate included,
	// each hop signed (the processor verified them before committing).
	var trail []string
	for _, h := range rej.Proposal.Route.Trail {
		trail = append(trail, h.Gate)
	}
	if want := []string{gates.Schema, gates.Invariant, curfewGate}; !slices.Equal(trail, want) {
		t.Errorf("refused move's trail = %v, want %v", trail, want)
	}
	if n := natstest.StreamMsgs(t, admin, events.StreamCommitted, events.SubjectCommittedAll); n != 1 {
		t.Errorf("%d committed events, want 1 (the market move)", n)
	}
}

// seed: the square with exits east to the market and down to the vault; ada at the square.
func seed(t *testing.T, url string) {
	t.Helper()
	g := graphdtest.Writer(t, url)
	T := gremlingo.T
	run := func(tr *gremlingo.GraphTraversal) {
		t.Helper()
		if err := <-tr.Iterate(); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
	for _, l := range []string{"square", "market", "vault"} {
		run(g.AddV("Location").Property(T.Id, "loc:"+l).Property("name", l).Property("version", int64(1)))
	}
	run(g.V("loc:square").AddE("exit").To(gremlingo.T__.V("loc:market")).Property("direction", "east"))
	run(g.V("loc:square").AddE("exit").To(gremlingo.T__.V("loc:vault")).Property("direction", "down"))
	run(g.AddV("Player").Property(T.Id, "player:ada").Property("name", "Ada"))
	run(g.V("player:ada").AddE("at").To(gremlingo.T__.V("loc:square")))
}
