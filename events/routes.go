package events

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Gates every route names: each route starts with the schema gate, ends with the audit gate,
// and a destructive kind's route passes the approval gate. The other gates are declared by the
// gate service's registry; the contract only carries their names on the wire.
const (
	GateSchema   = "schema"
	GateApproval = "approval"
	GateAudit    = "audit"
)

// The other built-in gates' names (GateSafety and GateReplay are with the narrator's route
// rule): the services that only need a gate's name (emitters, the event-processor, the
// dev tooling) take it from here instead of from the gate service (services/gate/gates), and
// events/route lists them all (route.Known).
const (
	GateInvariant = "invariant"
	GateDedup     = "dedup"
	GateRate      = "rate"
)

// Routes maps each proposal kind to the gates a new proposal of that kind passes, in order.
// The zero value has no routes. The routes file and its loader live with the gate service
// (events/route); this type is what emitters and gates share.
type Routes struct {
	byKind map[string][]string
}

// NewRoutes returns routes for byKind (copied). It does not validate: call Validate.
func NewRoutes(byKind map[string][]string) Routes {
	r := Routes{byKind: make(map[string][]string, len(byKind))}
	for k, gates := range byKind {
		r.byKind[k] = slices.Clone(gates)
	}
	return r
}

// Validate checks that every kind of the contract has a route, every route names only known
// gates (each once), starts with the schema gate and ends with the audit gate, and that a
// destructive kind's route passes the approval gate. With known nil, gate names are not
// checked: the gate registry (services/gate/gates) checks them where gates run.
func (r Routes) Validate(known []string) error {
	var probs []string
	for _, k := range Kinds() {
		if _, ok := r.byKind[k.Kind]; !ok {
			probs = append(probs, fmt.Sprintf("kind %s has no route: add one", k.Kind))
		}
	}
	for _, kind := range r.Kinds() {
		gates := r.byKind[kind]
		info, ok := LookupKind(kind)
		if !ok {
			probs = append(probs, fmt.Sprintf("route for unknown kind %s: the contract has no such proposal kind", kind))
			continue
		}
		if len(gates) == 0 {
			probs = append(probs, fmt.Sprintf("kind %s has an empty route", kind))
			continue
		}
		seen := map[string]bool{}
		for _, g := range gates {
			switch {
			case known != nil && !slices.Contains(known, g):
				probs = append(probs, fmt.Sprintf("kind %s: route names unknown gate %q (known: %s)", kind, g, strings.Join(known, ", ")))
			case seen[g]:
				probs = append(probs, fmt.Sprintf("kind %s: route names gate %s twice", kind, g))
			}
			seen[g] = true
		}
		if gates[0] != GateSchema {
			probs = append(probs, fmt.Sprintf("kind %s: route must start with %s (it starts with %s)", kind, GateSchema, gates[0]))
		}
		if gates[len(gates)-1] != GateAudit {
			probs = append(probs, fmt.Sprintf("kind %s: route must end with %s, so the audit record is written before persistence", kind, GateAudit))
		}
		if info.Destructive && !seen[GateApproval] {
			probs = append(probs, fmt.Sprintf("kind %s is destructive: its route must include %s", kind, GateApproval))
		}
	}
	if len(probs) > 0 {
		return errors.New("invalid routes: " + strings.Join(probs, "; "))
	}
	return nil
}

// For returns kind's gates in order (a copy), or an error for a kind without a route.
func (r Routes) For(kind string) ([]string, error) {
	gates, ok := r.byKind[kind]
	if !ok {
		return nil, fmt.Errorf("no route for proposal kind %q", kind)
	}
	return slices.Clone(gates), nil
}

// Kinds returns the kinds that have a route, sorted.
func (r Routes) Kinds() []string {
	out := slices.Collect(maps.Keys(r.byKind))
	sort.Strings(out)
	return out
}

// Uses reports whether any route names gate.
func (r Routes) Uses(gate string) bool {
	for _, gates := range r.byKind {
		if slices.Contains(gates, gate) {
			return true
		}
	}
	return false
}

// NextHops are the subjects gate forwards a passed proposal to: the gate after it on each route
// that names it, or the validated proposals' entry (proposals.validated.*, and the legacy
// proposals.validated) where it is the last.
// A narrator's route (NarratorRoute) counts too.
func (r Routes) NextHops(gate string) []string {
	var out []string
	for _, gates := range r.emitterRoutes() {
		i := slices.Index(gates, gate)
		switch {
		case i < 0:
		case i == len(gates)-1:
			// And the legacy subject, which the event-processor still drains: a gate from before
			// partitioned commits keeps working until it is replaced (upgrade the processor first).
			out = append(out, SubjectValidatedEntry, SubjectValidatedLegacy)
		default:
			out = append(out, GateSubject(gates[i+1]))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// FirstGates are the subjects of the first gate of the routes of kinds (of every kind when none
// is given): where new proposals enter.
func (r Routes) FirstGates(kinds ...string) []string {
	if len(kinds) == 0 {
		kinds = r.Kinds()
	}
	var out []string
	for _, k := range kinds {
		if gates, ok := r.byKind[k]; ok && len(gates) > 0 {
			out = append(out, GateSubject(gates[0]))
		}
	}
	return out
}
