// Package policy assembles the NATS permission policy (shared/natsx/natsauth) from what the
// services declare: the ai-worker's agent roles, the gates and their routes, the
// event-processor. `worldgate dev`, `worldgate nats-config` and the harnesses all take their
// users from here.
//
//go:generate go run .. nats-config -out ../../../deploy/nats -doc ../../../docs/nats-permissions.md -approvers ops
//go:generate go run .. k8s-gates -out ../../../deploy/kubernetes/base/gates
//go:generate go run .. deploy-manifests -compose-template ../../../deploy/compose/compose.in.yaml -compose ../../../deploy/compose/compose.yaml -k8s ../../../deploy/kubernetes/base/services -pdb ../../../deploy/kubernetes/overlays/prod/pdb.yaml -env ../../../deploy/compose/.env -dev-overlay ../../../deploy/kubernetes/overlays/dev -approvers ops
package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/ai-worker/budget"
	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
	"github.com/worldgate/worldgate/shared/actorpolicy"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// ExampleApprover is the one approver of the committed configuration (deploy/nats, compose):
// a studio generates its own with `worldgate nats-config -approvers alice,bob`.
const ExampleApprover = "ops"

// Service names the workers register with NATS service discovery (runtime.Options.Name).
const (
	serviceAIWorker = "ai-worker"
	serviceGate     = "gate"
)

// Policy describes every worker user for routes: the ai-worker, the gate processes of both
// standard layouts of reg's gates (one process per gate, and every gate in one process), the
// event-processor.
func Policy(reg *gates.Registry, routes events.Routes) (natsauth.Policy, error) {
	return ForLayouts(reg, routes, reg.OneProcessPerGate(), reg.OneProcess())
}

// ForLayouts is Policy with the gate processes of the given layouts (a user per process; a
// process that appears in several layouts once).
func ForLayouts(reg *gates.Registry, routes events.Routes, layouts ...gates.Layout) (natsauth.Policy, error) {
	if err := routes.Validate(reg.Known()); err != nil {
		return natsauth.Policy{}, err
	}
	ws := []natsauth.Worker{aiWorker(routes)}
	seen := map[string]bool{}
	for _, l := range layouts {
		if err := reg.ValidateLayout(l); err != nil {
			return natsauth.Policy{}, err
		}
		for _, proc := range l {
			if seen[proc.User()] {
				continue
			}
			seen[proc.User()] = true
			w, err := gateWorker(reg, routes, proc)
			if err != nil {
				return natsauth.Policy{}, err
			}
			ws = append(ws, w)
		}
	}
	ws = append(ws,
		natsauth.Worker{User: natsauth.EventProcessor, Summary: "the event-processor: the only publisher of committed events", Service: processor.Name,
			Grants: []natsauth.Grant{{
				// Its replicas share the partitions of the validated proposals (runtime.Partitioned):
				// one durable per partition, and a key each in the members bucket.
				Consumers: []natsauth.Consumer{{Stream: events.StreamProposals, Durable: processor.Name, Partitions: events.SubjectValidatedPartitions}},
				Buckets: []natsauth.Bucket{{Name: natsx.BucketMembers, Keys: processor.Name + ".*"},
					{Name: natsx.BucketMembers, Keys: processor.Name + ".*", ReadOnly: true, Watch: true}},
				Publish: []string{events.SubjectCommittedAll, events.RejectedSubject(processor.Gate),
					events.OutcomeKindFilter(events.OutcomeCommitted), events.OutcomeKindFilter(events.OutcomeFallback)},
			}}},
		natsauth.Worker{User: natsauth.MemoryWriter, Summary: "the memory-writer: keeps the interaction memory from committed events (reads COMMITTED, writes only the memory bucket)", Service: memory.Name,
			Grants: []natsauth.Grant{{
				Consumers: []natsauth.Consumer{{Stream: events.StreamCommitted, Durable: memory.Name}},
				Buckets:   []natsauth.Bucket{{Name: natsx.BucketMemory}},
			}}},
	)
	return natsauth.Policy{Workers: ws, Entry: routes.FirstGates()}, nil
}

// Roles returns every role with its permissions, computed from reg's gates and routes, with a
// user for each of the people who approve held proposals.
func Roles(reg *gates.Registry, routes events.Routes, approvers ...string) ([]natsauth.Role, error) {
	p, err := Policy(reg, routes)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, a := range approvers {
		if err := natsauth.CheckApprover(a); err != nil {
			return nil, err
		}
		if seen[a] {
			return nil, fmt.Errorf("approver %q is named twice", a)
		}
		seen[a] = true
	}
	p.Approvers = approvers
	return natsauth.Roles(p), nil
}

// GateSet is the role of a process running several gates (gate -gate schema,safety): the union
// of their permissions as the process runs them fused (gates.Registry.Grants), named by
// gates.Process.User.
func GateSet(reg *gates.Registry, routes events.Routes, gs []string) (natsauth.Role, error) {
	return GateProcess(reg, routes, gates.Process{Gates: gs})
}

// GateProcess is the role of any gate process, e.g. every gate run unfused for a side-by-side
// comparison (gate -gate all -fuse=false: user gates-unfused), which deploy/nats leaves out.
func GateProcess(reg *gates.Registry, routes events.Routes, proc gates.Process) (natsauth.Role, error) {
	if len(proc.Gates) == 0 {
		return natsauth.Role{}, errors.New("a gate set needs at least one gate")
	}
	w, err := gateWorker(reg, routes, proc)
	if err != nil {
		return natsauth.Role{}, fmt.Errorf("gate set: %w", err)
	}
	r, _ := natsauth.Lookup(natsauth.Roles(natsauth.Policy{Workers: []natsauth.Worker{w}}), proc.User())
	return r, nil
}

func aiWorker(routes events.Routes) natsauth.Worker {
	g := natsauth.Grant{Buckets: []natsauth.Bucket{{Name: natsx.BucketAICache},
		// LLM budgets: the control bucket is read and watched (operators' overrides and pauses,
		// actor policies) but written only where the ai-worker keeps its own records: the
		// budgets' definitions, players' offences and the actor policies strikes set. The
		// operators' ctl.* keys (the kill switch, pauses, raises) are the operators' alone.
		{Name: natsx.BucketBudget, ReadOnly: true, Watch: true},
		{Name: natsx.BucketBudget, Keys: budget.DefinitionKeys}, {Name: natsx.BucketBudget, Keys: budget.OffenceKeys},
		{Name: natsx.BucketBudget, Keys: actorpolicy.Keys},
		// The windows' keys are listed by the budget collector (subjects of per-actor budgets).
		{Name: natsx.BucketBudgetShort, Watch: true}, {Name: natsx.BucketBudgetLong, Watch: true}}}
	for _, r := range roles.All() {
		g.Consumers = append(g.Consumers, natsauth.Consumer{Stream: events.StreamWorld, Durable: r.Durable()})
	}
	g.Consumers = append(g.Consumers, natsauth.Consumer{Stream: events.StreamProposals, Durable: aiworker.RejectionsDurable})
	// New proposals enter on the roles' emitter subjects: the schema gate admits there only
	// each role's kinds.
	for _, r := range roles.All() {
		g.Publish = append(g.Publish, events.EmitSubject(r.Name))
	}
	g.Publish = append(g.Publish,
		// A transiently refused proposal goes back on the refusing gate's retry subject, where
		// the gate takes only the very proposal it refused (its retry ticket): no gate is skipped.
		events.SubjectRetryAll,
		// Final refusals (a refused move, a proposal refused for good), skips (a role that
		// decided not to act on an event) and reuses (a duplicate answered with the accepted
		// content): committed outcomes are the event-processor's.
		events.OutcomeKindFilter(events.OutcomeRefused), events.OutcomeKindFilter(events.OutcomeSkipped),
		events.OutcomeKindFilter(events.OutcomeReused))
	// Committed exit changes drop world-rules' cached list-exits answers.
	for _, subject := range aiworker.ExitChangeSubjects() {
		g.Follows = append(g.Follows, natsauth.Follow{Stream: events.StreamCommitted, Subject: subject})
	}
	return natsauth.Worker{User: natsauth.AIWorker, Service: serviceAIWorker,
		Summary: "the ai-worker: agent roles consuming world events and rejections, proposing on its roles' emitter subjects", Grants: []natsauth.Grant{g}}
}

// gateWorker is the user of a gate process: the union of its gates' grants as the process
// runs them (gates.Registry.Grants, from each gate's Spec, the routes and fusion).
func gateWorker(reg *gates.Registry, routes events.Routes, proc gates.Process) (natsauth.Worker, error) {
	summary := fmt.Sprintf("`gate -gate %s`: those gates' permissions together, fused (no hop between them)", strings.Join(proc.Gates, ","))
	if proc.NoFusion {
		summary = fmt.Sprintf("`gate -gate %s -fuse=false`: those gates' permissions together, each hopping to the next", strings.Join(proc.Gates, ","))
	}
	switch proc.User() {
	case natsauth.Gates:
		summary = "`gate -gate all`: every gate's permissions together, fused (no hop between gates of the process)"
	case natsauth.GateRole(proc.Gates[0]):
		s, _ := reg.Lookup(proc.Gates[0])
		summary = fmt.Sprintf("`gate -gate %s`: the %s gate; %s", s.Name, s.Name, s.Summary)
	}
	grants, err := reg.Grants(routes, proc)
	if err != nil {
		return natsauth.Worker{}, err
	}
	return natsauth.Worker{User: proc.User(), Summary: summary, Service: serviceGate, Grants: grants}, nil
}
