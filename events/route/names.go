package route

import (
	"slices"
	"sync"

	"github.com/worldgate/worldgate/events"
)

// Known lists the gates the embedded routes (routes.yaml) name: the built-in gates, each once,
// in the order the routes first name them (kinds in the contract's order). A gate's place in the
// routes file is its only record here: the gate service's registry (services/gate/gates) is
// checked against this list, and the services that only need the names (an emitter filling a
// route, the event-processor checking one) read it without linking the gate chain. A gate
// defined beyond the built-in ones (gates.Registry.Define) is known to its registry, not here.
func Known() []string { return slices.Clone(known()) }

var known = sync.OnceValue(func() []string { return Gates(Default()) })

// Gates lists the gates r names, each once, in the order its routes first name them (kinds in
// the contract's order, then any other kind in name order).
func Gates(r events.Routes) []string {
	kinds := make([]string, 0, len(events.Kinds()))
	for _, k := range events.Kinds() {
		kinds = append(kinds, k.Kind)
	}
	for _, k := range r.Kinds() {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	var out []string
	for _, k := range kinds {
		gates, _ := r.For(k)
		for _, g := range gates {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}
