// Package route holds the routes per proposal kind: which gates a new proposal must pass, in
// order. Routes are configuration, not code: an embedded default (routes.yaml) that a file can
// replace. Emitters call Default().For(kind) (or Load(path)) to fill a new proposal's
// Route.Pending; the gate service validates the same configuration at start-up.
//
// The package knows gate names only (Known); it does not run gates and has no I/O beyond
// reading the configuration file. It lives in the events module, below the services, because
// emitters (the ai-worker, mcp-propose, the world loader), the gate service and the
// event-processor all read the same routes and gate names; importing it costs a publisher who
// does not nothing (its YAML parser is compiled only into programs that import this package).
package route

import (
	_ "embed"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/worldgate/worldgate/events"
)

//go:embed routes.yaml
var defaultYAML []byte

type file struct {
	Routes map[string][]string `yaml:"routes"`
}

var defaultRoutes = sync.OnceValues(func() (events.Routes, error) { return Parse(defaultYAML) })

// Default returns the embedded default routes. The file ships with the binary and the package
// tests parse it, so a defect there is a build defect: Default panics on it, like a failed
// regexp.MustCompile.
func Default() events.Routes {
	r, err := defaultRoutes()
	if err != nil {
		panic("route: embedded routes.yaml: " + err.Error())
	}
	return r
}

// Load reads routes from the YAML file at path, or returns the default when path is empty.
// known are the gate names a route may use (Known: the gate registry's); without
// them names are checked where the gates run.
func Load(path string, known ...string) (events.Routes, error) {
	if path == "" {
		r, err := defaultRoutes()
		if err == nil && known != nil {
			err = r.Validate(known)
		}
		return r, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return events.Routes{}, fmt.Errorf("read routes file: %w", err)
	}
	r, err := Parse(data, known...)
	if err != nil {
		return events.Routes{}, fmt.Errorf("routes file %s: %w", path, err)
	}
	return r, nil
}

// Parse parses and validates a routes document (the shape of routes.yaml). known are the gate
// names a route may use (Known()); without them names are checked where the gate
// registry is known (services/gate/gates.Deps, the event-processor, the NATS policy).
func Parse(data []byte, known ...string) (events.Routes, error) {
	var f file
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return events.Routes{}, fmt.Errorf("not a valid routes document: %w", err)
	}
	r := events.NewRoutes(f.Routes)
	if err := r.Validate(known); err != nil {
		return events.Routes{}, err
	}
	if err := CheckSafety(r); err != nil {
		return events.Routes{}, err
	}
	return r, nil
}

// PlayerText reports whether proposals of kind carry text that reaches players (generated
// content and world building; events.KindInfo.PlayerText): their routes must pass the safety
// gate.
func PlayerText(kind string) bool {
	info, ok := events.LookupKind(kind)
	return !ok || info.PlayerText
}

// CheckSafety refuses routes where a kind whose text reaches players skips the safety gate.
func CheckSafety(r events.Routes) error {
	var probs []string
	for _, kind := range r.Kinds() {
		gates, _ := r.For(kind)
		if PlayerText(kind) && !slices.Contains(gates, events.GateSafety) {
			probs = append(probs, fmt.Sprintf("kind %s carries text that reaches players: its route must include %s", kind, events.GateSafety))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("invalid routes: %s", strings.Join(probs, "; "))
	}
	return nil
}
