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

func startEdge(_ context.Context, st *Stack) error {
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
	nc, js, err := st.ConnectAs(natsauth.Edge)
	if err != nil {
		return err
	}
	srv, err := edge.New(edge.Config{JetStream: js, Keys: ring, Logger: st.Log.With("component", "edge"), Registerer: st.Reg, Extra: consoleRoutes(st, consoleKey)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(st.Host, strconv.Itoa(st.EdgePort)))
	if err != nil {
		return portHint(err, "edge-port", st.EdgePort)
	}
	url := "http://" + ln.Addr().String()
	svc, err := edge.Register(nc, "0.0.0-dev", url)
	if err != nil {
		ln.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln, 5*time.Second); err != nil {
			st.Log.Error("edge stopped", "err", err)
		}
	}()
	st.OnStop(func() {
		cancel()
		<-done
		_ = svc.Stop()
	})
	st.Endpoints["edge.url"] = url
	st.Endpoints["edge.key"] = key
	st.EdgeURL, st.EdgeKey = url, key
	return nil
}
