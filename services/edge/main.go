// Command edge is Worldgate's HTTP front for game backends and clients that do not speak NATS:
// POST /v1/events publishes world events, GET /v1/outcomes streams their outcomes as Server-Sent
// Events, GET /v1/events/{id}/outcome long-polls one; the OpenAPI 3.1 document is at
// /openapi.json. Clients authenticate with API keys from -keys-file (scopes publish, read:all,
// read:<actor id>; players to restrict a key to; a rate each). It serves no /play console and
// so hands out no key: that is worldgate dev's. It connects to NATS as its own user
// (deploy/nats: edge), which may publish world events, read outcomes, and read back a stored
// world event whose idempotency key a request reuses.
//
//	edge -nats-url nats://127.0.0.1:4222 -nats-user edge -nats-password … -keys-file keys.json
//
// The service itself is edge.Start (services/internal/service).
package main

import (
	"context"

	"github.com/worldgate/worldgate/services/edge/edge"
	"github.com/worldgate/worldgate/services/internal/service"
)

func main() {
	var cfg edge.ServiceConfig
	service.Main(edge.Program, &cfg, func(ctx context.Context, in service.Infra) (service.Run, error) {
		s, err := edge.Start(ctx, in, cfg)
		if err != nil {
			return nil, err
		}
		return s.Run, nil
	})
}
