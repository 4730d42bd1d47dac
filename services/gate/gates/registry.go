package gates

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// builtin are the built-in gates: one line per gate, in the order the architecture lists them.
// Each gate's file declares its Spec; Builtin returns a registry holding them.
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
	// New builds the gate; it refuses the dependencies it needs but lacks. ctx bounds what
	// it does at start (waiting for its KV buckets, reading what it loads), not the gate's life.
	New func(ctx context.Context, d Deps) (Gate, error)
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
func (r *Registry) Needing(names []string, n Need) []string {
	var out []string
	for _, name := range names {
		if s, ok := r.Lookup(name); ok && slices.Contains(s.Needs, n) {
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

// Registry holds the gates a process, a policy or a test knows: the built-in ones (Builtin)
// and those defined on it since (Define), like the endpoints added to a nats.go micro
// Service. The routes, the NATS users and permissions, the signing keys, the layouts and the
// gates a process runs (Register) are read from the registry they are given; there is no
// global one. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	specs []Spec
}

// Builtin returns a new registry holding the built-in gates.
func Builtin() *Registry {
	r := &Registry{specs: make([]Spec, 0, len(builtin))}
	for _, s := range builtin {
		r.specs = append(r.specs, cloneSpec(s))
	}
	return r
}

var gateName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// Define adds a gate to the registry beyond the built-in ones (a plug-in gate, or a test's).
// Define it before the registry is read (routes validated, users and keys generated, gates
// registered). A name that is malformed, taken, or "all", a Spec without constructor, or an
// incomplete extra consumer is refused.
func (r *Registry) Define(s Spec) error {
	if err := s.validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.specs {
		if o.Name == s.Name {
			return fmt.Errorf("gate %q is already defined", s.Name)
		}
		for _, c := range o.Consumers {
			if slices.ContainsFunc(s.Consumers, func(n Consumer) bool { return n.Durable == c.Durable }) {
				return fmt.Errorf("gate %s: durable consumer %s is gate %s's", s.Name, c.Durable, o.Name)
			}
		}
	}
	r.specs = append(r.specs, cloneSpec(s))
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

// Specs returns every gate of the registry, built-in ones first, in the order they were defined.
func (r *Registry) Specs() []Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Spec, len(r.specs))
	for i, s := range r.specs {
		out[i] = cloneSpec(s)
	}
	return out
}

// Lookup returns the gate named name.
func (r *Registry) Lookup(name string) (Spec, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, s := range r.specs {
		if s.Name == name {
			return cloneSpec(s), true
		}
	}
	return Spec{}, false
}

// Known lists the name of every gate of the registry: the gates a route may name. The
// built-in ones are the gates the embedded routes name (route.Known(), which the services that
// only need the names read).
func (r *Registry) Known() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, len(r.specs))
	for i, s := range r.specs {
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
func (r *Registry) Grant(routes events.Routes, g string) (natsauth.Grant, error) {
	s, ok := r.Lookup(g)
	if !ok {
		return natsauth.Grant{}, fmt.Errorf("unknown gate %q: use one of %s", g, strings.Join(r.Known(), ", "))
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
	// All: the process runs every gate of its registry (OneProcess, `gate -gate all`).
	All bool
	// NoFusion: the process runs with fusion off (gate -fuse=false), so each of its gates
	// publishes to the next even when that gate is its own.
	NoFusion bool
}

// User is the NATS user of the process: gate-<g> for one gate, gates for every gate (All),
// gates-<g1>-<g2>… for another set; a set run with NoFusion has its own user, suffixed
// -unfused (gates-unfused), since it publishes more.
func (p Process) User() string {
	var u string
	switch {
	case len(p.Gates) == 1:
		return natsauth.GateRole(p.Gates[0])
	case p.All:
		u = natsauth.Gates
	default:
		u = "gates-" + strings.Join(p.Gates, "-")
	}
	if p.NoFusion {
		u += "-unfused"
	}
	return u
}

// Grants are the grants of process p's gates (Grant), as it runs them. With fusion, a gate
// no longer publishes to a next hop that is a gate of the same process: a run decides that
// gate without a hop, so the subject is left out of the gate's grant. A gate with an extra
// consumer that moves proposals on outside a run (Consumer.MovesOn: the approval gate forwards
// a person's decision to the gate after it) keeps its next hops.
func (r *Registry) Grants(routes events.Routes, p Process) ([]natsauth.Grant, error) {
	out := make([]natsauth.Grant, 0, len(p.Gates))
	for _, g := range p.Gates {
		gr, err := r.Grant(routes, g)
		if err != nil {
			return nil, err
		}
		if s, _ := r.Lookup(g); !p.NoFusion && !slices.ContainsFunc(s.Consumers, func(c Consumer) bool { return c.MovesOn }) {
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
		out[i] = Process{Gates: slices.Clone(p.Gates), All: p.All, NoFusion: true}
	}
	return out
}

// Layout is where the gates run: a list of processes, each gate in exactly one of them.
type Layout []Process

// OneProcessPerGate is the production layout: every gate its own process, user and key holder.
func (r *Registry) OneProcessPerGate() Layout {
	var l Layout
	for _, g := range r.Known() {
		l = append(l, Process{Gates: []string{g}})
	}
	return l
}

// OneProcess runs every gate in one process (`gate -gate all`).
func (r *Registry) OneProcess() Layout { return Layout{{Gates: r.Known(), All: true}} }

// ValidateLayout checks that every gate of the registry runs in exactly one process of l, and
// only its gates.
func (r *Registry) ValidateLayout(l Layout) error {
	seen := map[string]bool{}
	var probs []string
	for _, p := range l {
		if len(p.Gates) == 0 {
			probs = append(probs, "a process runs no gate")
		}
		for _, g := range p.Gates {
			if _, ok := r.Lookup(g); !ok {
				probs = append(probs, fmt.Sprintf("unknown gate %q", g))
			} else if seen[g] {
				probs = append(probs, fmt.Sprintf("gate %s runs in two processes", g))
			}
			seen[g] = true
		}
	}
	for _, g := range r.Known() {
		if !seen[g] {
			probs = append(probs, fmt.Sprintf("gate %s runs in no process", g))
		}
	}
	if len(probs) > 0 {
		return errors.New("invalid gate layout: " + strings.Join(probs, "; "))
	}
	return nil
}
