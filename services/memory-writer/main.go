// Command memory-writer keeps Worldgate's interaction memory (package memory): it reads every
// committed domain event (durable memory-writer on COMMITTED) and records, per NPC–player pair,
// the last exchanges and, per NPC, its recent events in KV bucket worldgate-memory, which
// mcp-world's get-recent-dialogue reads. It reads nothing but COMMITTED and writes nothing but
// that bucket; replicas share the durable.
//
//	memory-writer -nats-url nats://127.0.0.1:4222 -nats-user memory-writer -admin 127.0.0.1:9106
//
// Every flag has a WORLDGATE_* environment equivalent. The service itself is memory.Start
// (services/internal/service).
package main

import (
	"context"

	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/services/memory-writer/memory"
)

func main() {
	var cfg memory.Config
	service.Main(memory.Program, &cfg, func(ctx context.Context, in service.Infra) (service.Run, error) {
		return memory.Start(ctx, in, cfg)
	})
}
