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
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	key := "wg-dev-" + base64.RawURLEncoding.EncodeToString(b)
	return key, os.WriteFile(path, []byte(key+"\n"), 0o600)
}

// Edge serves edge, the HTTP API, as its own NATS user, with a dev key of every scope, and the
// /play console beside it.
var Edge = Part{"edge", startEdge}

func startEdge(_ context.Context, st *Stack) error {
	key, err := devEdgeKey(st.DataDir)
	if err != nil {
		return err
	}
	ring, err := edge.NewKeyring([]edge.Key{{Name: "dev", Secret: key, Scopes: []string{edge.ScopePublish, edge.ScopeReadAll}, Rate: 200}})
	if err != nil {
		return err
	}
	nc, js, err := st.ConnectAs(natsauth.Edge)
	if err != nil {
		return err
	}
	srv, err := edge.New(edge.Config{JetStream: js, Keys: ring, Logger: st.Log.With("component", "edge"), Registerer: st.Reg, Extra: consoleRoutes(st, key)})
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
