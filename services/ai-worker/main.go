// Command ai-worker runs Worldgate's agent roles (ambience, npc-dialogue, quest-planner,
// world-rules): it consumes world events from stream WORLD, builds context through the
// read-only MCP servers, calls the LLM through the provider layer and publishes proposals to
// proposals.gate.<first gate>. It follows rejections of its proposals (reprompt, retry,
// fallback). Every flag has a WORLDGATE_* environment equivalent; SIGTERM drains. The service
// itself is aiworker.Start (services/internal/service).
package main

import (
	"context"

	"github.com/worldgate/worldgate/services/ai-worker/aiworker"
	"github.com/worldgate/worldgate/services/internal/service"
)

func main() {
	var cfg aiworker.ServiceConfig
	service.Main(aiworker.Program, &cfg, func(ctx context.Context, in service.Infra) (service.Run, error) {
		s, err := aiworker.Start(ctx, in, cfg)
		if err != nil {
			return nil, err
		}
		return s.Run, nil
	})
}
