// Command event-processor turns validated proposals into domain events, applies each to the
// world graph exactly once and publishes it on world.committed.<type>. It is the only
// component configured with the graph's write credentials.
//
//	event-processor -nats-url nats://127.0.0.1:4222 -graph-url ws://127.0.0.1:8182/gremlin \
//	    -graph-user worldgate -admin 127.0.0.1:9105
//
// Every flag has a WORLDGATE_* environment equivalent (WORLDGATE_GRAPH_PASSWORD, …). The
// service itself is processor.Start (services/internal/service).
package main

import (
	"context"

	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/internal/service"
)

func main() {
	var cfg processor.Config
	service.Main(processor.Program, &cfg, func(ctx context.Context, in service.Infra) (service.Run, error) {
		return processor.Start(ctx, in, cfg)
	})
}
