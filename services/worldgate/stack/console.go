package stack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/worldgate/worldgate/services/edge/console"
	"github.com/worldgate/worldgate/shared/mcpx/client"
)

// consolePlayer is the demo world's player the /play console plays as.
const consolePlayer = "player:ana"

// consoleRoutes are edge's extra routes: the /play console.
func consoleRoutes(st *Stack, key string) map[string]http.Handler {
	{
		// The page reads the world through the MCP world server, as the agents do; the client
		// is made on first use (the MCP servers start after edge).
		var (
			mu  sync.Mutex
			mcp *client.Client
		)
		world := func(ctx context.Context) (*client.Client, error) {
			mu.Lock()
			defer mu.Unlock()
			if mcp != nil {
				return mcp, nil
			}
			if st.MCPURLs == nil {
				return nil, errors.New("the MCP servers are not running yet")
			}
			c, err := st.MCPClient(st.WorkersCtx, "world")
			if err != nil {
				return nil, err
			}
			mcp = c
			return c, nil
		}
		call := func(ctx context.Context, tool string, args map[string]any, out any) error {
			c, err := world(ctx)
			if err != nil {
				return err
			}
			res, err := c.Call(ctx, tool, args)
			if err != nil {
				return err
			}
			return res.Decode(out)
		}
		return console.Routes(console.Config{
			Key: key, Player: consolePlayer,
			Start: func(ctx context.Context) (string, error) {
				var p struct {
					Location *struct{ ID string } `json:"location"`
				}
				if err := call(ctx, "get-player-state", map[string]any{"playerId": consolePlayer}, &p); err != nil {
					return "", err
				}
				if p.Location == nil {
					return "loc:ash-gate", nil
				}
				return p.Location.ID, nil
			},
			Location: func(ctx context.Context, id string) (any, error) {
				var loc json.RawMessage
				err := call(ctx, "get-location", map[string]any{"locationId": id}, &loc)
				return loc, err
			},
		})
	}
}
