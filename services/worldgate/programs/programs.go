// Package programs is the one list of the programs Worldgate ships: their names, their main
// packages and, for each service built on services/internal/service and for graphd, its
// configuration (the flags it registers, the argv and environment a process of it needs). The
// process harness (scripts/internal/harness) builds and starts what it lists; a new program is
// added here once.
package programs

import (
	"flag"
	"slices"

	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/edge/edge"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
	"github.com/worldgate/worldgate/services/mcp-propose/proposetools"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
)

// Config is a service's configuration (processor.Config, gates.ServiceConfig, …).
type Config interface {
	// RegisterFlags registers the program's flags, each with its default.
	RegisterFlags(fs *flag.FlagSet)
	// Args and Env render the configuration as a process's argv or environment: the flags
	// whose values differ from their defaults.
	Args() []string
	Env() []string
}

// Program is one program.
type Program struct {
	Name    string // its binary's name
	Package string // its main package
	// Pipeline: it carries events to the graph, so the harnesses build and run it.
	Pipeline bool
	// Config returns its default configuration, for a service built on
	// services/internal/service and for graphd (server.ServiceConfig, the same methods without
	// the service package, which would link NATS into the graph server); nil for the CLI.
	Config func() Config
	// Deploy is what its compose service and Kubernetes manifest need (deploy.go); nil for a
	// program not deployed as a service of its own.
	Deploy *Deployment
}

const module = "github.com/worldgate/worldgate/services/"

// All are the programs, services first.
var All = []Program{
	{Name: "event-processor", Package: module + "event-processor", Pipeline: true,
		Config: func() Config { c := processor.DefaultConfig(); return &c },
		Deploy: deployEventProcessor},
	{Name: "gate", Package: module + "gate", Pipeline: true,
		Config: func() Config { c := gates.DefaultServiceConfig(); return &c },
		Deploy: deployGate},
	{Name: "ai-worker", Package: module + "ai-worker", Pipeline: true,
		Config: func() Config { c := aiworker.DefaultServiceConfig(); return &c },
		Deploy: deployAIWorker},
	{Name: "memory-writer", Package: module + "memory-writer", Pipeline: true,
		Config: func() Config { c := memory.DefaultConfig(); return &c },
		Deploy: deployMemoryWriter},
	{Name: "mcp-world", Package: module + "mcp-world", Pipeline: true,
		Config: func() Config { c := worldtools.DefaultServiceConfig(); return &c },
		Deploy: deployMCPWorld},
	{Name: "mcp-lore", Package: module + "mcp-lore", Pipeline: true,
		Config: func() Config { c := loretools.DefaultServiceConfig(); return &c },
		Deploy: deployMCPLore},
	{Name: "mcp-classify", Package: module + "mcp-classify", Pipeline: true,
		Config: func() Config { c := classifytools.DefaultServiceConfig(); return &c },
		Deploy: deployMCPClassify},
	{Name: "mcp-propose", Package: module + "mcp-propose",
		Config: func() Config { c := proposetools.DefaultServiceConfig(); return &c },
		Deploy: deployMCPPropose},
	{Name: "edge", Package: module + "edge",
		Config: func() Config { c := edge.DefaultServiceConfig(); return &c },
		Deploy: deployEdge},
	{Name: "graphd", Package: module + "graphd", Pipeline: true,
		Config: func() Config { c := server.DefaultServiceConfig(); return &c }},
	{Name: "worldgate", Package: module + "worldgate"},
}

// Named is the program named name.
func Named(name string) (Program, bool) {
	i := slices.IndexFunc(All, func(p Program) bool { return p.Name == name })
	if i < 0 {
		return Program{}, false
	}
	return All[i], true
}
