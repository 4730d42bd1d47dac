// Package apply maps each validated proposal kind to the domain event it becomes and to the
// one Gremlin traversal that applies it to the world graph. It is pure: it builds traversals
// and never submits them (the processor does).
//
// Every traversal has the same shape, one request and so one transaction:
//
//	g.inject(0).coalesce(
//	    V(eventId),                                   // marker exists: already decided
//	    <guard 1 violated>.addV('CommitConflict')…,   // a commit-time rule fails: record why
//	    …,
//	    sideEffect(<write 1>)….addV('AppliedEvent')…) // apply, and mark the event applied
//	  .project('label','source','committedUtc','reason')…
//
// so a redelivered proposal finds its marker and writes nothing, and a conflict is decided
// once (a later redelivery cannot turn a rejected proposal into a committed one). Batch puts
// several such coalesces under one union, so one request and one transaction apply several
// proposals, each exactly as alone.
//
// Only steps of TinkerPop ≤ 3.7 are used (inject, coalesce, V mid-traversal, not, filter,
// sideEffect, mergeV, mergeE with Direction ids, addV, addE, property with Cardinality.set,
// drop, union, sum, project, coalesce-in-by), so the traversals run unchanged on
// JanusGraph 1.x, Amazon Neptune and graphd. Vertex ids are user-supplied strings: JanusGraph
// needs graph.set-vertex-id=true with graph.allow-custom-vid-types=true; tags and objectives
// use set cardinality (Neptune has no list cardinality), so declare them SET in a JanusGraph
// schema.
package apply

import (
	"encoding/json"
	"fmt"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/provenance"
)

// Marker labels. AppliedEvent's existence means the event was applied; CommitConflict's that
// it was refused at commit time. Both have T.id = events.MarkerID(eventID), which the
// invariant gate reads too.
const (
	LabelApplied  = "AppliedEvent"
	LabelConflict = "CommitConflict"
)

var __ = gremlingo.T__

// Command is one domain event of a proposal and what applying it takes.
type Command struct {
	EventID string // events.DomainEventID(proposalId, n)
	Type    string // the DomainType, e.g. "PlayerMoved"
	Payload json.RawMessage
	guards  []guard
	writes  []func() *gremlingo.GraphTraversal
}

// guard is a commit-time rule: violated emits the traverser when the rule fails.
type guard struct {
	violated func() *gremlingo.GraphTraversal
	reason   string
}

// Meta is what the marker records besides the event.
type Meta struct {
	ProposalID    string
	CorrelationID string
	CommittedUTC  string // RFC 3339
	Source        string // the input message that decided the event ("PROPOSALS:<seq>")
}

// Decision is the marker the traversal found or wrote.
type Decision struct {
	Applied      bool   // AppliedEvent (else CommitConflict)
	Source       string // Meta.Source of the request that decided it
	CommittedUTC string
	Reason       string // why it conflicted
	Marker       string // the marker's vertex id (events.MarkerID of the event)
}

// Reasons returns the conflict reasons of c, in the order they are checked (for tests).
func (c Command) Reasons() []string {
	out := make([]string, len(c.guards))
	for i, g := range c.guards {
		out[i] = g.reason
	}
	return out
}

// Traversal builds the apply-once traversal of c on g.
func (c Command) Traversal(g *gremlingo.GraphTraversalSource, m Meta) *gremlingo.GraphTraversal {
	return c.decide(g.Inject(0), m)
}

// decide appends to t the coalesce that finds or writes c's marker, and the projection of
// the marker that ReadDecision reads.
func (c Command) decide(t *gremlingo.GraphTraversal, m Meta) *gremlingo.GraphTraversal {
	marker := func(t *gremlingo.GraphTraversal, label string) *gremlingo.GraphTraversal {
		return t.AddV(label).Property(gremlingo.T.Id, events.MarkerID(c.EventID)).
			Property("type", c.Type).Property("proposalId", m.ProposalID).
			Property("correlationId", m.CorrelationID).Property("committedUtc", m.CommittedUTC).
			Property("source", m.Source)
	}
	branches := []any{__.V(events.MarkerID(c.EventID))}
	for _, gd := range c.guards {
		branches = append(branches, marker(gd.violated(), LabelConflict).Property("reason", gd.reason))
	}
	apply := __.Identity()
	for _, w := range c.writes {
		apply = apply.SideEffect(w())
	}
	branches = append(branches, marker(apply, LabelApplied))
	return t.Coalesce(branches...).
		Project("label", "id", "source", "committedUtc", "reason").
		By(gremlingo.T.Label).
		By(gremlingo.T.Id).
		By(__.Coalesce(__.Values("source"), __.Constant(""))).
		By(__.Coalesce(__.Values("committedUtc"), __.Constant(""))).
		By(__.Coalesce(__.Values("reason"), __.Constant("")))
}

// Item is one command to apply in a batch, with its marker's meta.
type Item struct {
	Command Command
	Meta    Meta
}

// Batch builds one traversal, so one request and one transaction, that applies each item
// exactly as its own Traversal would, one after the other in order:
//
//	g.inject(0).union(
//	    coalesce(<item 0's branches>).project(…),
//	    coalesce(<item 1's branches>).project(…), …)
//
// Its results are the items' decisions in item order (ReadDecisions). A batch is what a
// writer sends for proposals it applies at the same moment anyway (different actors, never
// two of one actor's): one request's overhead, and one fsync, shared by them.
func Batch(g *gremlingo.GraphTraversalSource, items []Item) *gremlingo.GraphTraversal {
	branches := make([]any, len(items))
	for i, it := range items {
		branches[i] = it.Command.decide(__.Identity(), it.Meta)
	}
	return g.Inject(0).Union(branches...)
}

// ReadDecisions interprets a Batch traversal's results: the items' decisions, in item order.
// Each result names its marker, so a graph that answered the items out of order is found out,
// not misread.
func ReadDecisions(results []any, items []Item) ([]Decision, error) {
	if len(results) != len(items) {
		return nil, fmt.Errorf("apply batch of %d returned %d results", len(items), len(results))
	}
	out := make([]Decision, len(items))
	for i, r := range results {
		d, err := ReadDecision([]any{r})
		if err != nil {
			return nil, fmt.Errorf("apply batch, item %d: %w", i, err)
		}
		if want := events.MarkerID(items[i].Command.EventID); d.Marker != want {
			return nil, fmt.Errorf("apply batch, item %d: the graph answered for marker %q, want %q", i, d.Marker, want)
		}
		out[i] = d
	}
	return out, nil
}

// ReadDecision interprets the traversal's single result.
func ReadDecision(results []any) (Decision, error) {
	if len(results) != 1 {
		return Decision{}, fmt.Errorf("apply traversal returned %d results, want 1", len(results))
	}
	m := map[string]any{}
	switch r := results[0].(type) {
	case map[any]any:
		for k, v := range r {
			m[fmt.Sprint(k)] = v
		}
	case map[string]any:
		m = r
	default:
		return Decision{}, fmt.Errorf("apply traversal returned %T, want a map", results[0])
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	d := Decision{Source: str("source"), CommittedUTC: str("committedUtc"), Reason: str("reason"), Marker: str("id")}
	switch str("label") {
	case LabelApplied:
		d.Applied = true
	case LabelConflict:
	default:
		return Decision{}, fmt.Errorf("apply traversal ended on a %q vertex, want %s or %s: event id collides with another vertex", str("label"), LabelApplied, LabelConflict)
	}
	return d, nil
}

// Build maps a validated proposal to its commands (one per domain event). An error means the
// payload cannot be applied by this version (unknown kind, malformed payload): retrying cannot
// help.
func Build(p *events.Proposal) ([]Command, error) {
	info, ok := events.LookupKind(p.Kind)
	if !ok {
		return nil, fmt.Errorf("unknown proposal kind %q", p.Kind)
	}
	m, ok := mappers[p.Kind]
	if !ok {
		return nil, fmt.Errorf("proposal kind %q has no mapping in the event-processor", p.Kind)
	}
	// The domain event carries the payload's canonical encoding, the bytes the gates' digest
	// covers (attest.Digest), never the bytes the processor was handed: whatever reads
	// COMMITTED or OUTCOMES reads exactly what was signed.
	payload, err := provenance.Canonical(p.Payload)
	if err != nil {
		return nil, fmt.Errorf("%s payload: %w", p.Kind, err)
	}
	c := Command{EventID: events.DomainEventID(p.ProposalID, 0), Type: info.DomainType, Payload: payload}
	if err := m(&c, p); err != nil {
		return nil, err
	}
	return []Command{c}, nil
}

// Kinds lists the proposal kinds that have a mapping.
func Kinds() []string {
	out := make([]string, 0, len(mappers))
	for _, k := range events.Kinds() {
		if _, ok := mappers[k.Kind]; ok {
			out = append(out, k.Kind)
		}
	}
	return out
}
