// Command gate runs Worldgate's proposal gates: one per process (-gate schema) or several
// (-gate schema,safety or -gate all). Replicas of a gate share its durable consumer.
//
//	gate -gate all -nats-url nats://127.0.0.1:4222 -graph-url ws://127.0.0.1:8182/gremlin \
//	     -classify-url http://127.0.0.1:7403/mcp -classify-token "$TOKEN" -templates templates.json
//
// Every flag has a WORLDGATE_* environment equivalent (-nats-url → WORLDGATE_NATS_URL). The
// service itself is gates.Start (services/internal/service).
package main

import (
	"context"

	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/internal/service"
)

func main() {
	var cfg gates.ServiceConfig
	service.Main(gates.Program, &cfg, func(ctx context.Context, in service.Infra) (service.Run, error) {
		return gates.Start(ctx, in, cfg)
	})
}
