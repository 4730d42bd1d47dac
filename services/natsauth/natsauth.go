// Package natsauth is the one source of truth for Worldgate's NATS users: for each role (game
// backends publishing world events, the ai-worker, each gate, the event-processor, mcp-world,
// the operator's CLI and the provisioning admin) it computes exactly the subjects the role may
// publish and subscribe to, from the subjects and topology (events, shared/natsx), the agent
// roles and the gate routes. Least privilege is then the server's job, not the workers' good
// behaviour: only the event-processor may publish committed events, only publishers world
// events, each gate only its next hops.
//
// `worldgate dev` runs its embedded server with these users (Users) and connects each worker as
// its own role; `worldgate nats-config` writes the same users as nats-server configuration
// (Render) to deploy/nats, with the table in docs/nats-permissions.md. The package does no I/O.
//
//go:generate go run ../worldgate nats-config -out ../../deploy/nats -doc ../../docs/nats-permissions.md
package natsauth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/gate/route"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Role names: each is a NATS user name.
const (
	Admin          = "admin"
	Publisher      = "publisher"
	Operator       = "operator"
	AIWorker       = "ai-worker"
	EventProcessor = "event-processor"
	MCPWorld       = "mcp-world"
	// WorldLoader is a process that loads world files (the world-loader emitter).
	WorldLoader = "world-loader"
	// Gates is the union of every gate's permissions: `gate -gate all` and `worldgate dev`.
	Gates = "gates"
)

// GateRole is the role of a process running the one gate g: gate-<g>.
func GateRole(g string) string { return "gate-" + g }

// Role is one NATS user and what it may do.
type Role struct {
	Name    string
	Summary string // who connects as it
	// Permissions nil allows everything (Admin only).
	Permissions *natsx.Permissions
}

// Service names the workers register with NATS service discovery (runtime.Options.Name).
const (
	serviceAIWorker = "ai-worker"
	serviceGate     = "gate"
)

// Roles returns every role with its permissions, computed from routes.
func Roles(routes route.Routes) ([]Role, error) {
	if err := routes.Validate(); err != nil {
		return nil, err
	}
	out := []Role{
		{Name: Admin, Summary: "provisioning (`worldgate provision`, and `worldgate dev` itself): creates and updates streams, consumers and buckets; everything"},
		{Name: Publisher, Summary: "game backends and `worldgate publish`: world events only", Permissions: publisher()},
		{Name: Operator, Summary: "the `worldgate` CLI: status, trace, proposals list/show/approve/reject, world load", Permissions: operator(routes)},
		{Name: AIWorker, Summary: "the ai-worker: agent roles consuming world events and rejections, proposing on its roles' emitter subjects", Permissions: aiWorker(routes)},
		{Name: WorldLoader, Summary: "a world-file loader: world-building proposals on proposals.emit.world-loader", Permissions: emitterOnly(WorldLoader, events.EmitterWorldLoader)},
	}
	for _, g := range route.KnownGates() {
		out = append(out, Role{Name: GateRole(g), Summary: fmt.Sprintf("`gate -gate %s`: the %s gate", g, g), Permissions: gatePerms(routes, GateRole(g), g)})
	}
	out = append(out,
		Role{Name: Gates, Summary: "`gate -gate all` and the gates of `worldgate dev`: every gate's permissions together", Permissions: gatePerms(routes, Gates, route.KnownGates()...)},
		Role{Name: EventProcessor, Summary: "the event-processor: the only publisher of committed events", Permissions: eventProcessor()},
		Role{Name: MCPWorld, Summary: "mcp-world: reads the committed log (list-recent-events)", Permissions: mcpWorld()},
	)
	return out, nil
}

// GateSet is the role of a process running several gates (gate -gate schema,safety): the union
// of their permissions, named gates-<g1>-<g2>…. Gates is the set of every gate.
func GateSet(routes route.Routes, gates []string) (Role, error) {
	if len(gates) == 0 {
		return Role{}, errors.New("a gate set needs at least one gate")
	}
	for _, g := range gates {
		if !slices.Contains(route.KnownGates(), g) {
			return Role{}, fmt.Errorf("unknown gate %q in a gate set: use %s", g, strings.Join(route.KnownGates(), ", "))
		}
	}
	name := "gates-" + strings.Join(gates, "-")
	return Role{Name: name, Summary: fmt.Sprintf("`gate -gate %s`: those gates' permissions together", strings.Join(gates, ",")),
		Permissions: gatePerms(routes, name, gates...)}, nil
}

// Lookup returns the role named name.
func Lookup(rs []Role, name string) (Role, bool) {
	i := slices.IndexFunc(rs, func(r Role) bool { return r.Name == name })
	if i < 0 {
		return Role{}, false
	}
	return rs[i], true
}

// Users turns roles into users of the embedded server, each with password(role name).
func Users(rs []Role, password func(role string) string) []natsx.User {
	out := make([]natsx.User, 0, len(rs))
	for _, r := range rs {
		out = append(out, natsx.User{Name: r.Name, Password: password(r.Name), Permissions: r.Permissions})
	}
	return out
}

// PasswordEnv is the environment variable the generated server configuration reads role's
// password from: WORLDGATE_NATS_<ROLE>_PASSWORD (dashes become underscores).
func PasswordEnv(role string) string {
	return "WORLDGATE_NATS_" + strings.ToUpper(strings.ReplaceAll(role, "-", "_")) + "_PASSWORD"
}

// perms accumulates a role's subjects; build sorts and de-duplicates them.
type perms struct {
	pub, pubDeny, sub []string
}

func (p *perms) build() *natsx.Permissions {
	clean := func(s []string) []string {
		slices.Sort(s)
		return slices.Compact(s)
	}
	return &natsx.Permissions{Publish: clean(p.pub), PublishDeny: clean(p.pubDeny), Subscribe: clean(p.sub)}
}

// inbox lets the user receive replies on its own inboxes (see natsx.InboxPrefix).
func (p *perms) inbox(user string) { p.sub = append(p.sub, natsx.InboxPrefix(user)+".>") }

// consumer lets a worker create or update its durable pull consumer, pull from it and settle
// what it receives (a single-filter consumer is created on ….<durable>.<filter>), and list
// the stream's consumers: its lag collector (natsx.LagCollector) reports them.
func (p *perms) consumer(stream, durable string) {
	p.pub = append(p.pub,
		api("CONSUMER.CREATE", stream, durable), api("CONSUMER.CREATE", stream, durable, ">"),
		api("CONSUMER.INFO", stream, durable),
		api("CONSUMER.MSG.NEXT", stream, durable),
		"$JS.ACK."+stream+"."+durable+".>",
		api("CONSUMER.LIST", stream))
}

// kv lets a worker read and write bucket; watch adds listing keys (an ordered consumer of
// the bucket's stream, with flow control).
func (p *perms) kv(bucket string, watch bool) {
	stream := "KV_" + bucket
	p.pub = append(p.pub, api("STREAM.INFO", stream), api("DIRECT.GET", stream, ">"), "$KV."+bucket+".>")
	if watch {
		p.pub = append(p.pub, api("CONSUMER.CREATE", stream), api("CONSUMER.CREATE", stream, ">"),
			api("CONSUMER.INFO", stream, ">"), api("CONSUMER.DELETE", stream, ">"), "$JS.FC."+stream+".>")
	}
}

// kvKeys lets a worker read and write only the keys of bucket matching pattern (a NATS subject
// pattern over keys, e.g. "schema.>").
func (p *perms) kvKeys(bucket, pattern string) {
	stream := "KV_" + bucket
	p.pub = append(p.pub, api("STREAM.INFO", stream), api("DIRECT.GET", stream, "$KV", bucket, pattern), "$KV."+bucket+"."+pattern)
}

// streamInfo lets a worker read the configuration of every stream and bucket of the
// topology, which is all -provision does against a server already provisioned by the admin.
func (p *perms) streamInfo() {
	t := natsx.DefaultTopology(natsx.TopologyOptions{})
	for _, s := range t.Streams {
		p.pub = append(p.pub, api("STREAM.INFO", s.Name))
	}
	for _, b := range t.Buckets {
		p.pub = append(p.pub, api("STREAM.INFO", "KV_"+b.Bucket))
	}
}

// service lets a worker register with NATS service discovery as worldgate-<name> and answer
// the operator's and the admin's discovery requests (`worldgate status`). Replies go only to
// their inboxes: NATS's allow_responses would let anyone who may send a request make the
// worker publish to any subject named as the reply.
func (p *perms) service(name string) {
	svc := "worldgate-" + name
	p.sub = append(p.sub, "$SRV.PING", "$SRV.INFO", "$SRV.STATS", "$SRV.*."+svc, "$SRV.*."+svc+".*",
		"status") // the runtime's "status" endpoint (nats.go/micro serves it on the subject "status")
	p.pub = append(p.pub, natsx.InboxPrefix(Operator)+".>", natsx.InboxPrefix(Admin)+".>")
}

// worker is what every runtime worker needs: its inbox, discovery and the provisioning check.
func worker(user, service string) *perms {
	p := &perms{}
	p.inbox(user)
	p.service(service)
	p.streamInfo()
	return p
}

func api(parts ...string) string { return "$JS.API." + strings.Join(parts, ".") }

func publisher() *natsx.Permissions {
	p := &perms{pub: []string{events.SubjectWorldAll}}
	p.inbox(Publisher)
	p.outcomeReader()
	return p.build()
}

// outcomeReader lets a game backend read the outcomes of its requests (events.Watch and
// events.Await): ordered consumers of its own on stream OUTCOMES, and nothing on any other
// stream.
func (p *perms) outcomeReader() {
	s := events.StreamOutcomes
	p.pub = append(p.pub, api("STREAM.INFO", s), api("CONSUMER.CREATE", s, ">"), api("CONSUMER.INFO", s, ">"),
		api("CONSUMER.MSG.NEXT", s, ">"), api("CONSUMER.DELETE", s, ">"))
}

// firstGates are the subjects of the first gate of every route: where new proposals enter.
func firstGates(routes route.Routes, kinds ...string) []string {
	if len(kinds) == 0 {
		kinds = routes.Kinds()
	}
	var out []string
	for _, k := range kinds {
		if gates, err := routes.For(k); err == nil {
			out = append(out, events.GateSubject(gates[0]))
		}
	}
	return out
}

// nextHops are the subjects a gate forwards a passed proposal to: the gate after it on each
// route that names it, or proposals.validated where it is the last.
func nextHops(routes route.Routes, g string) []string {
	var out []string
	for _, k := range routes.Kinds() {
		gates, _ := routes.For(k)
		i := slices.Index(gates, g)
		switch {
		case i < 0:
		case i == len(gates)-1:
			out = append(out, events.SubjectValidated)
		default:
			out = append(out, events.GateSubject(gates[i+1]))
		}
	}
	return out
}

// emitterOnly may only propose, as emitter.
func emitterOnly(user, emitter string) *natsx.Permissions {
	p := &perms{pub: []string{events.EmitSubject(emitter)}}
	p.inbox(user)
	return p.build()
}

func aiWorker(_ route.Routes) *natsx.Permissions {
	p := worker(AIWorker, serviceAIWorker)
	for _, r := range roles.All() {
		p.consumer(events.StreamWorld, r.Durable())
		p.pub = append(p.pub, events.DeadLetterSubject(r.Durable()))
		// New proposals enter on the role's emitter subject: the schema gate admits there only
		// the role's kinds.
		p.pub = append(p.pub, events.EmitSubject(r.Name))
	}
	p.consumer(events.StreamProposals, aiworker.RejectionsDurable)
	p.pub = append(p.pub, events.DeadLetterSubject(aiworker.RejectionsDurable))
	// A transiently refused proposal goes back on the refusing gate's retry subject, where
	// the gate takes only the very proposal it refused (its retry ticket): no gate is skipped.
	p.pub = append(p.pub, events.SubjectRetryAll)
	p.kv(natsx.BucketAICache, false)
	// Final refusals (a refused move, a proposal refused for good): committed outcomes are
	// the event-processor's.
	p.pub = append(p.pub, events.OutcomeKindFilter(events.OutcomeRefused))
	return p.build()
}

// gatePerms are the permissions of a process running gates gs as user.
func gatePerms(routes route.Routes, user string, gs ...string) *natsx.Permissions {
	p := worker(user, serviceGate)
	for _, g := range gs {
		durable := "gate-" + g // gates.Register's durable consumer and dead-letter stage
		p.consumer(events.StreamProposals, durable)
		p.pub = append(p.pub, nextHops(routes, g)...)
		p.pub = append(p.pub, events.RejectedSubject(g), events.DeadLetterSubject(durable))
		// Retry tickets: each gate reads and writes only its own (keys <gate>.…).
		p.kvKeys(natsx.BucketRetries, g+".>")
		switch g {
		case route.Dedup:
			p.kv(natsx.BucketDedup, false)
		case route.Rate:
			p.kv(natsx.BucketRate, false)
		case route.Approval:
			p.kv(natsx.BucketApprovals, true) // expiry lists the held proposals
			p.pub = append(p.pub, events.SubjectApproval)
			p.consumer(events.StreamProposals, gates.DecisionsDurable) // people's decisions
			p.pub = append(p.pub, events.DeadLetterSubject(gates.DecisionsDurable))
		case route.Audit:
			p.pub = append(p.pub, events.SubjectAuditProposals)
		}
	}
	return p.build()
}

func eventProcessor() *natsx.Permissions {
	p := worker(EventProcessor, processor.Name)
	p.consumer(events.StreamProposals, processor.Name)
	p.pub = append(p.pub, events.SubjectCommittedAll, events.RejectedSubject(processor.Gate), events.DeadLetterSubject(processor.Name),
		events.OutcomeKindFilter(events.OutcomeCommitted), events.OutcomeKindFilter(events.OutcomeFallback))
	return p.build()
}

func mcpWorld() *natsx.Permissions {
	p := &perms{}
	p.inbox(MCPWorld)
	s := events.StreamCommitted
	p.pub = append(p.pub, api("STREAM.INFO", s), api("STREAM.MSG.GET", s), api("DIRECT.GET", s), api("DIRECT.GET", s, ">"))
	return p.build()
}

// operator reads everything (stream and consumer information, messages through its own
// ephemeral consumers, direct gets, service discovery) and writes only what its commands
// need: decisions in the approvals bucket, a decided proposal to the approval gate's next hop
// or its rejection, and world files to the first gate. It may not create, delete or pull from
// the workers' durable consumers.
func operator(routes route.Routes) *natsx.Permissions {
	p := &perms{}
	p.inbox(Operator)
	p.pub = append(p.pub, "$SRV.>", api("INFO"),
		api("STREAM.INFO", "*"), api("STREAM.NAMES"), api("STREAM.LIST"), api("STREAM.MSG.GET", "*"), api("DIRECT.GET", ">"),
		api("CONSUMER.INFO", "*", "*"), api("CONSUMER.NAMES", "*"), api("CONSUMER.LIST", "*"),
		api("CONSUMER.CREATE", ">"), api("CONSUMER.DELETE", ">"), api("CONSUMER.MSG.NEXT", ">"), "$JS.FC.>")
	// A person's decision on a held proposal is a request the approval gate carries out, on
	// the operator's own decisions subject (the gate takes the approver from it): the operator
	// neither writes held proposals nor publishes to any gate; world building enters on the
	// operator emitter's subject.
	p.pub = append(p.pub, events.DecisionsSubject(Operator), events.EmitSubject(events.EmitterOperator))
	for _, c := range durables() {
		p.pubDeny = append(p.pubDeny,
			api("CONSUMER.CREATE", c.stream, c.durable), api("CONSUMER.CREATE", c.stream, c.durable, ">"),
			api("CONSUMER.DELETE", c.stream, c.durable), api("CONSUMER.MSG.NEXT", c.stream, c.durable))
	}
	return p.build()
}

type durable struct{ stream, durable string }

// durables are the workers' durable consumers.
func durables() []durable {
	var out []durable
	for _, r := range roles.All() {
		out = append(out, durable{events.StreamWorld, r.Durable()})
	}
	out = append(out, durable{events.StreamProposals, aiworker.RejectionsDurable}, durable{events.StreamProposals, processor.Name})
	for _, g := range route.KnownGates() {
		out = append(out, durable{events.StreamProposals, "gate-" + g})
	}
	out = append(out, durable{events.StreamProposals, gates.DecisionsDurable})
	return out
}
