package route

import (
	"fmt"
	"slices"
	"sync"

	"github.com/worldgate/worldgate/events"
)

// names are the gates a route may name: the built-in gates, in the order the architecture lists
// them, then those defined since (Define). The gate service's registry (services/gate/gates)
// declares each gate's Spec and records the name of every gate it defines here, so that the
// services that only need the names (an emitter filling a route, the event-processor checking
// one) know them without linking the gate chain.
var names = struct {
	sync.RWMutex
	list []string
}{list: []string{
	events.GateSchema, events.GateSafety, events.GateInvariant, events.GateDedup,
	events.GateReplay, events.GateRate, events.GateApproval, events.GateAudit,
}}

// Known lists the name of every defined gate: the gates a route may name.
func Known() []string {
	names.RLock()
	defer names.RUnlock()
	return slices.Clone(names.list)
}

// Define records the name of a gate beyond the built-in ones. The gate registry calls it
// (gates.Define) once it has checked the gate's Spec; call that, not this. A name already
// known is refused.
func Define(name string) error {
	names.Lock()
	defer names.Unlock()
	if slices.Contains(names.list, name) {
		return fmt.Errorf("gate %q is already defined", name)
	}
	names.list = append(names.list, name)
	return nil
}
