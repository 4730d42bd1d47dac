// Package route holds the routes per proposal kind: which gates a new proposal must pass, in
// order. Routes are configuration, not code: an embedded default (routes.yaml) that a file can
// replace. Emitters call Default().For(kind) (or Load(path)) to fill a new proposal's
// Route.Pending; the gate service validates the same configuration at start-up.
//
// The package knows gate names only; it does not run gates and has no I/O beyond reading the
// configuration file.
package route

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/worldgate/worldgate/events"
)

// Gate names, in the order the architecture lists them.
const (
	Schema    = "schema"
	Safety    = "safety"
	Invariant = "invariant"
	Dedup     = "dedup"
	Replay    = "replay"
	Rate      = "rate"
	Approval  = "approval"
	Audit     = "audit"
)

// KnownGates lists every gate a route may name.
func KnownGates() []string {
	return []string{Schema, Safety, Invariant, Dedup, Replay, Rate, Approval, Audit}
}

//go:embed routes.yaml
var defaultYAML []byte

// Routes maps each proposal kind to its gates. The zero value has no routes; use Default or Load.
type Routes struct {
	byKind map[string][]string
}

type file struct {
	Routes map[string][]string `yaml:"routes"`
}

var defaultRoutes = sync.OnceValues(func() (Routes, error) { return Parse(defaultYAML) })

// Default returns the embedded default routes. The file ships with the binary and the package
// tests parse it, so a defect there is a build defect: Default panics on it, like a failed
// regexp.MustCompile.
func Default() Routes {
	r, err := defaultRoutes()
	if err != nil {
		panic("route: embedded routes.yaml: " + err.Error())
	}
	return r
}

// Load reads routes from the YAML file at path, or returns the default when path is empty.
func Load(path string) (Routes, error) {
	if path == "" {
		return defaultRoutes()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Routes{}, fmt.Errorf("read routes file: %w", err)
	}
	r, err := Parse(data)
	if err != nil {
		return Routes{}, fmt.Errorf("routes file %s: %w", path, err)
	}
	return r, nil
}

// Parse parses and validates a routes document (the shape of routes.yaml).
func Parse(data []byte) (Routes, error) {
	var f file
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Routes{}, fmt.Errorf("not a valid routes document: %w", err)
	}
	r := Routes{byKind: make(map[string][]string, len(f.Routes))}
	for k, gates := range f.Routes {
		r.byKind[k] = slices.Clone(gates)
	}
	if err := r.Validate(); err != nil {
		return Routes{}, err
	}
	return r, nil
}

// Validate checks that every proposal kind of the contract has a route, that every route names
// known gates once each, starts with schema and ends with audit, and that destructive kinds
// pass approval. The error lists every problem, each naming the kind.
func (r Routes) Validate() error {
	var probs []string
	known := KnownGates()
	for _, k := range events.Kinds() {
		if _, ok := r.byKind[k.Kind]; !ok {
			probs = append(probs, fmt.Sprintf("kind %s has no route: add one", k.Kind))
		}
	}
	kinds := make([]string, 0, len(r.byKind))
	for k := range r.byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		gates := r.byKind[kind]
		info, ok := events.LookupKind(kind)
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
			case !slices.Contains(known, g):
				probs = append(probs, fmt.Sprintf("kind %s: route names unknown gate %q (known: %s)", kind, g, strings.Join(known, ", ")))
			case seen[g]:
				probs = append(probs, fmt.Sprintf("kind %s: route names gate %s twice", kind, g))
			}
			seen[g] = true
		}
		if gates[0] != Schema {
			probs = append(probs, fmt.Sprintf("kind %s: route must start with %s (it starts with %s)", kind, Schema, gates[0]))
		}
		if gates[len(gates)-1] != Audit {
			probs = append(probs, fmt.Sprintf("kind %s: route must end with %s, so the audit record is written before persistence", kind, Audit))
		}
		if info.Destructive && !seen[Approval] {
			probs = append(probs, fmt.Sprintf("kind %s is destructive: its route must include %s", kind, Approval))
		}
		if PlayerText(kind) && !seen[Safety] {
			probs = append(probs, fmt.Sprintf("kind %s carries text that reaches players: its route must include %s", kind, Safety))
		}
	}
	if len(probs) > 0 {
		return errors.New("invalid routes: " + strings.Join(probs, "; "))
	}
	return nil
}

// PlayerText reports whether proposals of kind carry text that reaches players (generated
// content and world building): their routes must pass the safety gate. Moves carry none;
// removals carry only an operator's reason.
func PlayerText(kind string) bool {
	switch kind {
	case events.KindPlayerMoved, events.KindExitRemoved, events.KindNPCRemoved:
		return false
	}
	return true
}

// For returns a copy of kind's route, ready to be a new proposal's Route.Pending.
func (r Routes) For(kind string) ([]string, error) {
	gates, ok := r.byKind[kind]
	if !ok {
		return nil, fmt.Errorf("no route for proposal kind %q", kind)
	}
	return slices.Clone(gates), nil
}

// Kinds lists the kinds that have a route, sorted.
func (r Routes) Kinds() []string {
	out := make([]string, 0, len(r.byKind))
	for k := range r.byKind {
		out = append(out, k)
	}
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
