package stack

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/worldgate/worldgate/services/edge/edge"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// devEdgeKey is the dev API key of edge (every scope), kept in <data-dir>/edge-dev.key.
func devEdgeKey(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "edge-dev.key")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		return strings.TrimSpace(string(b)), nil
	}
	key, err := randomKey()
	if err != nil {
		return "", err
	}
	return key, os.WriteFile(path, []byte(key+"\n"), 0o600)
}

func randomKey() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "wg-dev-" + base64.RawURLEncoding.EncodeToString(b), nil
}

// Edge serves edge, the HTTP API, as its own NATS user, with a dev key of every scope (in
// endpoints.json, never served over HTTP), and the /play console beside it with a key of its own
// that acts only for the console's player.
var Edge = Part{"edge", startEdge}

func startEdge(ctx context.Context, st *Stack) error {
	key, err := devEdgeKey(st.DataDir)
	if err != nil {
		return err
	}
	// The /play console's key is handed to whoever opens the page: it acts only for the
	// console's player, and is new at each start.
	consoleKey, err := randomKey()
	if err != nil {
		return err
	}
	play := edge.PlayerKey("play-console", consoleKey, consolePlayer)
	play.Rate = 50
	ring, err := edge.NewKeyring([]edge.Key{{Name: "dev", Secret: key, Scopes: []string{edge.ScopePublish, edge.ScopeReadAll}, Rate: 200}, play})
	if err != nil {
		return err
	}
	in, err := st.Infra(edge.Name, natsauth.Edge)
	if err != nil {
		return err
	}
	// Edge as its process runs it (edge.Start), with the dev keys and the console beside the API.
	cfg := edge.DefaultServiceConfig()
	cfg.Listen, cfg.Drain = net.JoinHostPort(st.Host, strconv.Itoa(st.EdgePort)), 5*time.Second
	cfg.Keyring, cfg.Extra, cfg.Version = ring, consoleRoutes(st, consoleKey), "0.0.0-dev"
	svc, err := edge.Start(ctx, in, cfg)
	if err != nil {
		return portHint(err, "edge-port", st.EdgePort)
	}
	st.Go(edge.Name, svc.Run)
	url := svc.URL
	st.Endpoints["edge.url"] = url
	st.Endpoints["edge.key"] = key
	st.EdgeURL, st.EdgeKey = url, key
	return nil
}
