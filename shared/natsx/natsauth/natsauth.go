// Package natsauth generates Worldgate's NATS users from a description of the components: for
// each role (game backends publishing world events, each runtime worker, the operator's CLI, the
// provisioning admin, mcp-world) it computes exactly the subjects the role may publish and
// subscribe to. Least privilege is then the server's job, not the workers' good behaviour:
// only the event-processor may publish committed events, only publishers world events, each
// gate only its next hops.
//
// The package knows the topology (shared/natsx) and the subjects (events), not the services:
// each worker's consumers, buckets and subjects are given in a Policy, which the services
// assemble (services/worldgate/policy) from their own declarations. `worldgate dev` runs its
// embedded server with these users (Users); `worldgate nats-config` writes the same users as
// nats-server configuration (Render*). The package does no I/O.
package natsauth

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Role names of the fixed roles, and of the workers every layout has: each is a NATS user name.
const (
	Admin          = "admin"
	Publisher      = "publisher"
	Operator       = "operator"
	AIWorker       = "ai-worker"
	EventProcessor = "event-processor"
	// MemoryWriter keeps the interaction memory from COMMITTED.
	MemoryWriter = "memory-writer"
	MCPWorld     = "mcp-world"
	// MCPPropose is mcp-propose, the outside narrators' proposal server (the narrator emitter).
	MCPPropose = "mcp-propose"
	// MCPLore and MCPClassify use NATS only to register with service discovery.
	MCPLore     = "mcp-lore"
	MCPClassify = "mcp-classify"
	// WorldLoader is a process that loads world files (the world-loader emitter).
	WorldLoader = "world-loader"
	Edge        = "edge"
	// Gates is the union of every gate's permissions: `gate -gate all` and `worldgate dev`.
	Gates = "gates"
)

// approverPrefix starts the NATS user name of every approver.
const approverPrefix = "approver-"

// ApproverRole is the NATS user of the person named name: approver-<name>.
func ApproverRole(name string) string { return approverPrefix + name }

// ApproverOf returns the person a NATS user belongs to, and false for a user that is no
// approver's.
func ApproverOf(user string) (string, bool) {
	name, ok := strings.CutPrefix(user, approverPrefix)
	if !ok || CheckApprover(name) != nil {
		return "", false
	}
	return name, true
}

// CheckApprover reports whether name can name an approver: 1 to 32 lowercase letters, digits,
// '-' or '_', starting with a letter (it becomes a NATS user, a subject token and an
// environment variable's name).
func CheckApprover(name string) error {
	if name == "" || len(name) > 32 {
		return fmt.Errorf("approver name %q: 1 to 32 characters", name)
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '_'):
		default:
			return fmt.Errorf("approver name %q: lowercase letters, digits, '-' and '_' only, starting with a letter", name)
		}
	}
	return nil
}

// GateRole is the role of a process running the one gate g: gate-<g>.
func GateRole(g string) string { return "gate-" + g }

// Consumer is a durable pull consumer a worker owns on a stream. The worker may create it,
// pull from it, settle what it receives and dead-letter what it gives up on
// (events.DeadLetterSubject(Durable)).
type Consumer struct {
	Stream  string
	Durable string
	// Partitions, if set, is the filter pattern of a partitioned consumer's partitions (e.g.
	// proposals.validated.*.*; runtime.Partitioned): the worker may also create durables of
	// any name filtered within it (<Durable>-p<NN>), pull from them, settle what it receives and
	// unpin them — never another worker's durable on the stream. A pattern rather than a list,
	// so that the permissions hold whatever the partition count the stream was provisioned with.
	Partitions string
}

// Bucket is a KV bucket a worker reads and writes; Watch adds listing its keys, ReadOnly
// takes away writing.
type Bucket struct {
	Name     string
	Watch    bool
	ReadOnly bool
	// Keys restricts the worker to the keys matching this NATS subject pattern over keys
	// (e.g. "schema.>": a gate's own retry tickets); empty: every key.
	Keys string
}

// Grant is what one component of a worker needs beyond the runtime's own (its inbox, service
// discovery, the provisioning check).
type Grant struct {
	Consumers []Consumer
	Buckets   []Bucket
	// Publish are the subjects the component publishes to.
	Publish []string
	// Follows are what the component reads through ordered consumers of its own.
	Follows []Follow
}

// Follow is a stream's subject that a worker reads through ordered consumers of its own
// (ephemeral, any name, filtered to Subject), e.g. the ai-worker's committed exit changes. It
// is never a subscription to the subject itself, which would give a push consumer pointed
// there someone to deliver to, and it never reaches another worker's durable on the stream.
type Follow struct {
	Stream  string
	Subject string
}

// Worker is one runtime worker's NATS user: the union of its components' grants.
type Worker struct {
	User    string
	Summary string // who connects as it
	// Service is the name the worker registers with NATS service discovery (worldgate-<Service>).
	Service string
	Grants  []Grant
}

// Policy describes every runtime worker user, the subjects where new proposals enter (the
// operator may submit world files there), and the people who may approve held proposals.
type Policy struct {
	Workers []Worker
	Entry   []string
	// Approvers are the people who decide held proposals, each with a NATS user of their own
	// (ApproverRole): the approval gate records the approver from the subject the decision
	// came on, which only that person's user may publish to.
	Approvers []string
}

// Role is one NATS user and what it may do.
type Role struct {
	Name    string
	Summary string // who connects as it
	// Permissions nil allows everything (Admin only).
	Permissions *natsx.Permissions
}

// Roles returns every role with its permissions: the admin, publisher and operator, then p's
// workers in order, then mcp-world, edge, mcp-propose, mcp-lore and mcp-classify.
func Roles(p Policy) []Role {
	out := []Role{
		{Name: Admin, Summary: "provisioning (`worldgate provision`, and `worldgate dev` itself): creates and updates streams, consumers and buckets; everything"},
		{Name: Publisher, Summary: "game backends and `worldgate publish`: world events only", Permissions: publisher()},
		{Name: Operator, Summary: "the `worldgate` CLI: status, trace, proposals list/show/approve/reject, world load", Permissions: operator(p)},
		{Name: WorldLoader, Summary: "a world-file loader: world-building proposals on proposals.emit.world-loader", Permissions: emitterOnly(WorldLoader, events.EmitterWorldLoader)},
	}
	for _, a := range p.Approvers {
		out = append(out, Role{Name: ApproverRole(a), Summary: "approver " + a + ": `worldgate proposals` list/show/approve/reject, decisions recorded as " + a, Permissions: approver(p, a)})
	}
	for _, w := range p.Workers {
		out = append(out, Role{Name: w.User, Summary: w.Summary, Permissions: w.permissions(durables(p))})
	}
	return append(out, Role{Name: MCPWorld, Summary: "mcp-world: reads the committed log (list-recent-events) and the interaction memory (get-recent-dialogue)", Permissions: mcpWorld()},
		Role{Name: Edge, Summary: "edge, the HTTP API: publishes world events, reads outcomes", Permissions: edgePerms()},
		Role{Name: MCPPropose, Summary: "mcp-propose, outside narrators' proposals: proposals.emit.narrator, the content-request world events, reads outcomes", Permissions: mcpPropose()},
		Role{Name: MCPLore, Summary: "mcp-lore: service discovery only", Permissions: discoveryOnly(MCPLore)},
		Role{Name: MCPClassify, Summary: "mcp-classify: service discovery only", Permissions: discoveryOnly(MCPClassify)})
}

// discoveryOnly lets an MCP server that needs nothing else from NATS register with service
// discovery under its own name.
func discoveryOnly(user string) *natsx.Permissions {
	p := &perms{}
	p.inbox(user)
	p.service(user)
	return p.build()
}

// mcpPropose: the narrator emitter's proposals, the world events a narrator may enqueue
// (events.NarratorEventTypes), and outcomes for its status tool (its own ordered consumers on
// OUTCOMES).
func mcpPropose() *natsx.Permissions {
	p := &perms{pub: []string{events.EmitSubject(events.EmitterNarrator)}}
	for _, t := range events.NarratorEventTypes() {
		p.pub = append(p.pub, events.Subject(t))
	}
	p.inbox(MCPPropose)
	p.service(MCPPropose)
	p.outcomeReader()
	return p.build()
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

// permissions are w's; others are every durable of the policy, which a Follow must not reach.
func (w Worker) permissions(others []Consumer) *natsx.Permissions {
	p := worker(w.User, w.Service)
	for _, g := range w.Grants {
		for _, c := range g.Consumers {
			p.consumer(c.Stream, c.Durable)
			p.pub = append(p.pub, events.DeadLetterSubject(c.Durable))
			if c.Partitions != "" {
				p.partitions(c, others)
			}
		}
		for _, b := range g.Buckets {
			switch {
			case b.ReadOnly:
				p.kvRead(b.Name, cmp.Or(b.Keys, ">"), b.Watch)
			case b.Keys != "":
				p.kvKeys(b.Name, b.Keys)
			default:
				p.kv(b.Name, b.Watch)
			}
		}
		p.pub = append(p.pub, g.Publish...)
		for _, f := range g.Follows {
			p.follow(f, others)
		}
	}
	return p.build()
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

// partitions lets a worker create the partitions' durables of c (any name, filtered within
// c.Partitions), read their info, pull from them, settle what they deliver, pause and unpin
// them (a partition is paused while the replica giving it up lets its messages settle);
// never one of the policy's other durables on the stream.
func (p *perms) partitions(c Consumer, durables []Consumer) {
	p.pub = append(p.pub, api("CONSUMER.CREATE", c.Stream, "*", c.Partitions), api("CONSUMER.INFO", c.Stream, "*"),
		api("CONSUMER.MSG.NEXT", c.Stream, "*"), api("CONSUMER.UNPIN", c.Stream, "*"), api("CONSUMER.PAUSE", c.Stream, "*"),
		"$JS.ACK."+c.Stream+".*.>")
	for _, o := range durables {
		if o.Stream == c.Stream && o.Durable != c.Durable {
			p.pubDeny = append(p.pubDeny, api("CONSUMER.CREATE", o.Stream, o.Durable, ">"), api("CONSUMER.INFO", o.Stream, o.Durable),
				api("CONSUMER.MSG.NEXT", o.Stream, o.Durable), api("CONSUMER.UNPIN", o.Stream, o.Durable), api("CONSUMER.PAUSE", o.Stream, o.Durable),
				"$JS.ACK."+o.Stream+"."+o.Durable+".>")
		}
	}
}

// follow lets a worker create ordered consumers of its own on f.Stream filtered to f.Subject
// (a single-filter consumer is created on ….<name>.<filter>), pull from them and read their
// info; never a durable of the policy's on that stream. It may not delete consumers: the
// delete request names no filter, so a right to delete its own would be a right to delete
// anyone's (another worker's watch, an operator's). An ordered consumer deletes its old
// consumer best-effort after a gap (nats.go ignores the refusal) and the server removes it
// once inactive (jetstream's ordered consumers set an inactive threshold).
func (p *perms) follow(f Follow, durables []Consumer) {
	p.pub = append(p.pub, api("CONSUMER.CREATE", f.Stream, "*", f.Subject), api("CONSUMER.MSG.NEXT", f.Stream, "*"),
		api("CONSUMER.INFO", f.Stream, "*"))
	for _, c := range durables {
		if c.Stream == f.Stream {
			p.pubDeny = append(p.pubDeny, api("CONSUMER.CREATE", c.Stream, c.Durable, f.Subject),
				api("CONSUMER.MSG.NEXT", c.Stream, c.Durable), api("CONSUMER.DELETE", c.Stream, c.Durable))
		}
	}
}

// emitterOnly may only propose, as emitter.
func emitterOnly(user, emitter string) *natsx.Permissions {
	p := &perms{pub: []string{events.EmitSubject(emitter)}}
	p.inbox(user)
	return p.build()
}

// kvKeys lets a worker read and write only the keys of bucket matching pattern.
func (p *perms) kvKeys(bucket, pattern string) {
	stream := "KV_" + bucket
	p.pub = append(p.pub, api("STREAM.INFO", stream), api("DIRECT.GET", stream, "$KV", bucket, pattern), "$KV."+bucket+"."+pattern)
}

// kvRead lets a worker read (direct gets) the keys of bucket matching pattern, and write none;
// watch adds watching those keys (an ordered consumer filtered to them: the filter is part of
// the create request's subject, so no other keys can be watched; the watch deletes its
// consumer when it stops).
func (p *perms) kvRead(bucket, pattern string, watch bool) {
	stream := "KV_" + bucket
	p.pub = append(p.pub, api("STREAM.INFO", stream), api("DIRECT.GET", stream, "$KV", bucket, pattern))
	if watch {
		p.pub = append(p.pub, api("CONSUMER.CREATE", stream, "*", "$KV", bucket, pattern), api("CONSUMER.DELETE", stream, "*"),
			"$JS.FC."+stream+".>")
	}
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

// service lets a worker or an MCP server register with NATS service discovery as worldgate-<name> and answer
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

// edgePerms: edge publishes world events for its HTTP clients, reads outcomes for them (its own
// ordered consumers on OUTCOMES), and registers with service discovery as worldgate-edge. When
// JetStream answers that an idempotency key was used before, edge reads that first event by its
// sequence (a message get on WORLD, no consumer) to tell a retry from another body (409). For
// an event's journey (GET /v1/events/{id}/journey) it reads the refusals on PROPOSALS: ordered
// consumers filtered to proposals.rejected.> only, never the proposals in flight.
func edgePerms() *natsx.Permissions {
	p := &perms{pub: []string{events.SubjectWorldAll}}
	p.inbox(Edge)
	p.service("edge")
	p.outcomeReader()
	p.pub = append(p.pub, api("STREAM.INFO", events.StreamWorld), api("STREAM.MSG.GET", events.StreamWorld))
	s := events.StreamProposals
	p.pub = append(p.pub, api("STREAM.INFO", s), api("CONSUMER.CREATE", s, "*", events.SubjectRejectedAll),
		api("CONSUMER.INFO", s, ">"), api("CONSUMER.MSG.NEXT", s, ">"), api("CONSUMER.DELETE", s, ">"))
	return p.build()
}

func mcpWorld() *natsx.Permissions {
	p := &perms{}
	p.inbox(MCPWorld)
	p.service(MCPWorld)
	s := events.StreamCommitted
	p.pub = append(p.pub, api("STREAM.INFO", s), api("STREAM.MSG.GET", s), api("DIRECT.GET", s), api("DIRECT.GET", s, ">"))
	// get-recent-dialogue: the interaction memory, read only.
	p.kvRead(natsx.BucketMemory, ">", false)
	return p.build()
}

// operator reads everything (stream and consumer information, messages through its own
// ephemeral consumers, direct gets, service discovery) and writes only what its commands
// need: world files to the operator emitter's subject, the LLM budgets' control keys and (for
// the regenerations it pays for) their spend windows. It
// may not create, delete or pull from the workers' durable consumers, and it decides no held
// proposal: that takes an approver's own credentials (approver).
func operator(pol Policy) *natsx.Permissions {
	p := reader(pol, Operator)
	p.pub = append(p.pub, "$SRV.>")
	// World building enters on the operator emitter's subject.
	p.pub = append(p.pub, events.EmitSubject(events.EmitterOperator))
	// worldgate budget: set, raise, pause and resume LLM budgets (the control bucket).
	// worldgate replay and shadow call models too, paid for under the same budgets: they
	// reserve and settle in the spend windows like an ai-worker.
	p.pub = append(p.pub, "$KV."+natsx.BucketBudget+".>", "$KV."+natsx.BucketBudgetShort+".>", "$KV."+natsx.BucketBudgetLong+".>")
	return p.build()
}

// approver is the person name: reads like the operator (to list and show held proposals) and
// publishes decisions on its own subject only, proposals.decisions.<name>, where the approval
// gate takes the approver from. It neither writes held proposals nor publishes to any gate.
func approver(pol Policy, name string) *natsx.Permissions {
	p := reader(pol, ApproverRole(name))
	p.pub = append(p.pub, events.DecisionsSubject(name))
	return p.build()
}

// reader is what the operator's and the approvers' CLI reads with: stream and consumer
// information, its own ephemeral consumers, direct gets; never the workers' durables.
func reader(pol Policy, user string) *perms {
	p := &perms{}
	p.inbox(user)
	p.pub = append(p.pub, api("INFO"),
		api("STREAM.INFO", "*"), api("STREAM.NAMES"), api("STREAM.LIST"), api("STREAM.MSG.GET", "*"), api("DIRECT.GET", ">"),
		api("CONSUMER.INFO", "*", "*"), api("CONSUMER.NAMES", "*"), api("CONSUMER.LIST", "*"),
		api("CONSUMER.CREATE", ">"), api("CONSUMER.DELETE", ">"), api("CONSUMER.MSG.NEXT", ">"), "$JS.FC.>")
	for _, c := range durables(pol) {
		p.pubDeny = append(p.pubDeny,
			api("CONSUMER.CREATE", c.Stream, c.Durable), api("CONSUMER.CREATE", c.Stream, c.Durable, ">"),
			api("CONSUMER.DELETE", c.Stream, c.Durable), api("CONSUMER.MSG.NEXT", c.Stream, c.Durable))
	}
	return p
}

// durables are the workers' durable consumers.
func durables(p Policy) []Consumer {
	var out []Consumer
	for _, w := range p.Workers {
		for _, g := range w.Grants {
			out = append(out, g.Consumers...)
		}
	}
	return out
}
