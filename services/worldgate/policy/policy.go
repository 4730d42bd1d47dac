// Package policy assembles the NATS permission policy (shared/natsx/natsauth) from what the
// services declare: the ai-worker's agent roles, the gates and their routes, the
// event-processor. `worldgate dev`, `worldgate nats-config` and the harnesses all take their
// users from here.
//
//go:generate go run .. nats-config -out ../../../deploy/nats -doc ../../../docs/nats-permissions.md
package policy

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
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// Service names the workers register with NATS service discovery (runtime.Options.Name).
const (
	serviceAIWorker = "ai-worker"
	serviceGate     = "gate"
)

// Policy describes every worker user for routes: the ai-worker, one user per gate, the union
// of the gates, the event-processor.
func Policy(routes events.Routes) (natsauth.Policy, error) {
	if err := routes.Validate(route.KnownGates()); err != nil {
		return natsauth.Policy{}, err
	}
	ws := []natsauth.Worker{aiWorker(routes)}
	for _, g := range route.KnownGates() {
		ws = append(ws, gateWorker(routes, natsauth.GateRole(g), fmt.Sprintf("`gate -gate %s`: the %s gate", g, g), g))
	}
	ws = append(ws,
		gateWorker(routes, natsauth.Gates, "`gate -gate all` and the gates of `worldgate dev`: every gate's permissions together", route.KnownGates()...),
		natsauth.Worker{User: natsauth.EventProcessor, Summary: "the event-processor: the only publisher of committed events", Service: processor.Name,
			Grants: []natsauth.Grant{{
				Consumers: []natsauth.Consumer{{Stream: events.StreamProposals, Durable: processor.Name}},
				Publish: []string{events.SubjectCommittedAll, events.RejectedSubject(processor.Gate),
					events.OutcomeKindFilter(events.OutcomeCommitted), events.OutcomeKindFilter(events.OutcomeFallback)},
			}}},
	)
	return natsauth.Policy{Workers: ws, Entry: routes.FirstGates()}, nil
}

// Roles returns every role with its permissions, computed from routes.
func Roles(routes events.Routes) ([]natsauth.Role, error) {
	p, err := Policy(routes)
	if err != nil {
		return nil, err
	}
	return natsauth.Roles(p), nil
}

// GateSet is the role of a process running several gates (gate -gate schema,safety): the union
// of their permissions, named gates-<g1>-<g2>….
func GateSet(routes events.Routes, gs []string) (natsauth.Role, error) {
	if len(gs) == 0 {
		return natsauth.Role{}, errors.New("a gate set needs at least one gate")
	}
	for _, g := range gs {
		if !slices.Contains(route.KnownGates(), g) {
			return natsauth.Role{}, fmt.Errorf("unknown gate %q in a gate set: use %s", g, strings.Join(route.KnownGates(), ", "))
		}
	}
	name := "gates-" + strings.Join(gs, "-")
	w := gateWorker(routes, name, fmt.Sprintf("`gate -gate %s`: those gates' permissions together", strings.Join(gs, ",")), gs...)
	p := natsauth.Roles(natsauth.Policy{Workers: []natsauth.Worker{w}})
	r, _ := natsauth.Lookup(p, name)
	return r, nil
}

func aiWorker(routes events.Routes) natsauth.Worker {
	g := natsauth.Grant{Buckets: []natsauth.Bucket{{Name: natsx.BucketAICache},
		// LLM budgets: the control keys are watched (overrides, pauses, actor policies).
		{Name: natsx.BucketBudget, Watch: true}, {Name: natsx.BucketBudgetShort}, {Name: natsx.BucketBudgetLong}}}
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
		// Final refusals (a refused move, a proposal refused for good): committed outcomes are
		// the event-processor's.
		events.OutcomeKindFilter(events.OutcomeRefused))
	return natsauth.Worker{User: natsauth.AIWorker, Service: serviceAIWorker,
		Summary: "the ai-worker: agent roles consuming world events and rejections, proposing on its roles' emitter subjects", Grants: []natsauth.Grant{g}}
}

// gateWorker is the user of a process running gates gs.
func gateWorker(routes events.Routes, user, summary string, gs ...string) natsauth.Worker {
	w := natsauth.Worker{User: user, Summary: summary, Service: serviceGate}
	for _, g := range gs {
		gr := natsauth.Grant{
			Consumers: []natsauth.Consumer{{Stream: events.StreamProposals, Durable: gates.Durable(g)}},
			Buckets:   []natsauth.Bucket{{Name: natsx.BucketRetries, Keys: g + ".>"}}, // its own retry tickets only
			Publish:   append(routes.NextHops(g), events.RejectedSubject(g)),
		}
		switch g {
		case route.Dedup:
			gr.Buckets = append(gr.Buckets, natsauth.Bucket{Name: natsx.BucketDedup})
		case route.Rate:
			gr.Buckets = append(gr.Buckets, natsauth.Bucket{Name: natsx.BucketRate})
		case route.Approval:
			gr.Buckets = append(gr.Buckets, natsauth.Bucket{Name: natsx.BucketApprovals, Watch: true}) // expiry lists the held proposals
			gr.Publish = append(gr.Publish, events.SubjectApproval)
			gr.Consumers = append(gr.Consumers, natsauth.Consumer{Stream: events.StreamProposals, Durable: gates.DecisionsDurable}) // people's decisions
		case route.Audit:
			gr.Publish = append(gr.Publish, events.SubjectAuditProposals)
		}
		w.Grants = append(w.Grants, gr)
	}
	return w
}
