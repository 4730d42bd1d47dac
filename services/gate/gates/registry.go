package gates

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// builtin is the gate registry: one line per gate, in the order the architecture lists them.
// Each gate's file declares its Spec.
var builtin = []Spec{schemaGate, safetyGate, invariantGate, dedupGate, replayGate, rateGate, approvalGate, auditGate}

// Spec declares a gate once. Everything else about the gate derives from it: the names a route
// may use (Known), the durable consumer and its subjects (Register), the gate's NATS
// permissions (services/worldgate/policy), its signing key (`worldgate keys`, `worldgate dev`),
// the gates `worldgate dev` and the harnesses run, and the Kubernetes gate manifests.
type Spec struct {
	// Name is the gate's name in routes, subjects (proposals.gate.<name>), its durable consumer
	// (Durable), its signing key and its NATS user: lower-case letters, digits and dashes.
	Name string
	// Summary says in a few words what the gate checks (permissions documentation, manifests).
	Summary string
	// New builds the gate; it refuses the dependencies it needs but lacks.
	New func(Deps) (Gate, error)
	// Buckets are the KV buckets the gate reads and writes, beyond its own retry tickets.
	Buckets []natsauth.Bucket
	// Consumers are durable consumers the gate owns beyond its gate consumer (Durable(Name)).
	Consumers []Consumer
	// Publish are the subjects the gate publishes to beyond its next hops (from the routes)
	// and its rejections (proposals.rejected.<name>).
	Publish []string
	// Needs are the outside dependencies New requires (Deps fields), which a deployment must
	// give the gate's process: the generated Kubernetes manifests wire them.
	Needs []Need
}

// Need is an outside dependency of a gate.
type Need string

// Needing returns those of the named gates whose Spec needs n: what a process running them
// must be given (the gate service connects to a dependency only for them).
func Needing(names []string, n Need) []string {
	var out []string
	for _, name := range names {
		if s, ok := Lookup(name); ok && slices.Contains(s.Needs, n) {
			out = append(out, name)
		}
	}
	return out
}

// The dependencies a gate may need.
const (
	// NeedClassifier: an MCP client of mcp-classify (Deps.Classify), with its token.
	NeedClassifier Need = "classifier"
	// NeedGraphReader: a read-only graph connection (Deps.Graph), as the graph's reader.
	NeedGraphReader Need = "graph-reader"
	// NeedTemplates: the prompt templates file (Deps.Templates).
	NeedTemplates Need = "templates"
)

// Consumer is an extra durable consumer of a gate on stream PROPOSALS.
type Consumer struct {
	Durable  string
	Subjects []string
	// Handler returns the handler of the consumer for the built gate g.
	Handler func(g Gate, d Deps) (message.HandlerFunc, error)
	// MovesOn: the consumer sends proposals on to the gate's next hops outside a run (the
	// approval gate forwards a person's decision), so the gate keeps those subjects in its
	// grant even where fusion would decide the next gate without a hop (Process.Grants).
	MovesOn bool
}

var registry = struct {
	sync.RWMutex
	specs []Spec
}{specs: slices.Clone(builtin)}

var gateName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// Define registers a gate beyond the built-in ones (a plug-in gate, or a test's). Call it
// before anything reads the registry (routes are validated, users and keys generated, gates
// registered): typically first thing in main, or in TestMain. A name that is malformed, taken,
// or "all", a Spec without constructor, or an incomplete extra consumer is refused.
func Define(s Spec) error {
	if err := s.validate(); err != nil {
		return err
	}
	registry.Lock()
	defer registry.Unlock()
	for _, o := range registry.specs {
		if o.Name == s.Name {
			return fmt.Errorf("gate %q is already defined", s.Name)
		}
		for _, c := range o.Consumers {
			if slices.ContainsFunc(s.Consumers, func(n Consumer) bool { return n.Durable == c.Durable }) {
				return fmt.Errorf("gate %s: durable consumer %s is gate %s's", s.Name, c.Durable, o.Name)
			}
		}
	}
	// The name is also recorded where the services that need only names read it (events/route).
	if err := route.Define(s.Name); err != nil {
		return err
	}
	registry.specs = append(registry.specs, cloneSpec(s))
	return nil
}

func (s Spec) validate() error {
	var probs []string
	if !gateName.MatchString(s.Name) || s.Name == "all" {
		probs = append(probs, fmt.Sprintf("name %q: use lower-case letters, digits and dashes (not \"all\")", s.Name))
	}
	if s.New == nil {
		probs = append(probs, "no constructor (New)")
	}
	for _, c := range s.Consumers {
		if c.Durable == "" || len(c.Subjects) == 0 || c.Handler == nil {
			probs = append(probs, fmt.Sprintf("extra consumer %q needs a durable name, subjects and a handler", c.Durable))
		}
		if c.Durable == Durable(s.Name) {
			probs = append(probs, fmt.Sprintf("extra consumer %q is the gate's own consumer", c.Durable))
		}
	}
	if len(probs) > 0 {
		return errors.New("gate spec: " + strings.Join(probs, "; "))
	}
	return nil
}

func cloneSpec(s Spec) Spec {
	s.Buckets, s.Consumers, s.Publish, s.Needs = slices.Clone(s.Buckets), slices.Clone(s.Consumers), slices.Clone(s.Publish), slices.Clone(s.Needs)
	return s
}

// Specs returns every defined gate, built-in ones first, in the order they were defined.
func Specs() []Spec {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Spec, len(registry.specs))
	for i, s := range registry.specs {
		out[i] = cloneSpec(s)
	}
	return out
}

// Lookup returns the gate named name.
func Lookup(name string) (Spec, bool) {
	registry.RLock()
	defer registry.RUnlock()
	for _, s := range registry.specs {
		if s.Name == name {
			return cloneSpec(s), true
		}
	}
	return Spec{}, false
}

// Known lists the name of every defined gate: the gates a route may name. It equals
// route.Known(), which the services that only need the names read.
func Known() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, len(registry.specs))
	for i, s := range registry.specs {
		out[i] = s.Name
	}
	return out
}

// Durable is the name of gate g's durable consumer on stream PROPOSALS, and its dead-letter stage.
func Durable(g string) string { return "gate-" + g }

// InputSubjects are the subjects gate consumes: its gate subject and its retry subject; the
// schema gate also takes new proposals from every emitter's subject (proposals.emit.>). Its
// own gate subject, where proposals entered before emitter subjects, stays an input so that
// what was in flight there is refused with a reason rather than left unread.
func InputSubjects(gate string) []string {
	subjects := []string{events.GateSubject(gate), events.RetrySubject(gate)}
	if gate == Schema {
		subjects = append([]string{events.SubjectEmitAll}, subjects...)
	}
	return subjects
}

// Grant is what gate g needs from NATS for routes: its consumers (gate-<g> and its extra
// ones), its retry tickets and buckets, and the subjects it publishes (its next hops on the
// routes, its rejections and what its Spec declares). The NATS policy is assembled from it.
func Grant(routes events.Routes, g string) (natsauth.Grant, error) {
	s, ok := Lookup(g)
	if !ok {
		return natsauth.Grant{}, fmt.Errorf("unknown gate %q: use one of %s", g, strings.Join(Known(), ", "))
	}
	gr := natsauth.Grant{
		Consumers: []natsauth.Consumer{{Stream: events.StreamProposals, Durable: Durable(g)}},
		Buckets:   append([]natsauth.Bucket{{Name: natsx.BucketRetries, Keys: g + ".>"}}, s.Buckets...), // its own retry tickets only
		Publish:   append(append(routes.NextHops(g), events.RejectedSubject(g)), s.Publish...),
	}
	for _, c := range s.Consumers {
		gr.Consumers = append(gr.Consumers, natsauth.Consumer{Stream: events.StreamProposals, Durable: c.Durable})
	}
	return gr, nil
}

// Process is one process of a deployment's gate layout: the gates it runs, in the order of the
// routes. Its NATS user is the union of its gates' grants and it holds its gates' signing keys.
// Consecutive gates of a route that share a process may be decided in one hop.
type Process struct {
	Gates []string
	// NoFusion: the process runs with fusion off (gate -fuse=false), so each of its gates
	// publishes to the next even when that gate is its own.
	NoFusion bool
}

// User is the NATS user of the process: gate-<g> for one gate, gates for every defined gate,
// gates-<g1>-<g2>… for another set; a set run with NoFusion has its own user, suffixed
// -unfused (gates-unfused), since it publishes more.
func (p Process) User() string {
	var u string
	switch {
	case len(p.Gates) == 1:
		return natsauth.GateRole(p.Gates[0])
	case slices.Equal(p.Gates, Known()):
		u = natsauth.Gates
	default:
		u = "gates-" + strings.Join(p.Gates, "-")
	}
	if p.NoFusion {
		u += "-unfused"
	}
	return u
}

// Grants are the grants of the process's gates (Grant), as it runs them. With fusion, a gate
// no longer publishes to a next hop that is a gate of the same process: a run decides that
// gate without a hop, so the subject is left out of the gate's grant. A gate with an extra
// consumer that moves proposals on outside a run (Consumer.MovesOn: the approval gate forwards
// a person's decision to the gate after it) keeps its next hops.
func (p Process) Grants(routes events.Routes) ([]natsauth.Grant, error) {
	out := make([]natsauth.Grant, 0, len(p.Gates))
	for _, g := range p.Gates {
		gr, err := Grant(routes, g)
		if err != nil {
			return nil, err
		}
		if s, _ := Lookup(g); !p.NoFusion && !slices.ContainsFunc(s.Consumers, func(c Consumer) bool { return c.MovesOn }) {
			gr.Publish = slices.DeleteFunc(gr.Publish, func(subject string) bool {
				return slices.ContainsFunc(p.Gates, func(local string) bool { return subject == events.GateSubject(local) })
			})
		}
		out = append(out, gr)
	}
	return out, nil
}

// Unfused is the layout with fusion off in every process (gate -fuse=false): each process
// with several gates gets its own user (Process.User).
func (l Layout) Unfused() Layout {
	out := make(Layout, len(l))
	for i, p := range l {
		out[i] = Process{Gates: slices.Clone(p.Gates), NoFusion: true}
	}
	return out
}

// Layout is where the gates run: a list of processes, each gate in exactly one of them.
type Layout []Process

// OneProcessPerGate is the production layout: every gate its own process, user and key holder.
func OneProcessPerGate() Layout {
	var l Layout
	for _, g := range Known() {
		l = append(l, Process{Gates: []string{g}})
	}
	return l
}

// OneProcess runs every gate in one process (`gate -gate all`).
func OneProcess() Layout { return Layout{{Gates: Known()}} }

// Validate checks that every defined gate runs in exactly one process, and only defined gates.
func (l Layout) Validate() error {
	seen := map[string]bool{}
	var probs []string
	for _, p := range l {
		if len(p.Gates) == 0 {
			probs = append(probs, "a process runs no gate")
		}
		for _, g := range p.Gates {
			if _, ok := Lookup(g); !ok {
				probs = append(probs, fmt.Sprintf("unknown gate %q", g))
			} else if seen[g] {
				probs = append(probs, fmt.Sprintf("gate %s runs in two processes", g))
			}
			seen[g] = true
		}
	}
	for _, g := range Known() {
		if !seen[g] {
			probs = append(probs, fmt.Sprintf("gate %s runs in no process", g))
		}
	}
	if len(probs) > 0 {
		return errors.New("invalid gate layout: " + strings.Join(probs, "; "))
	}
	return nil
}
