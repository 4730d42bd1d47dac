package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/worldgate/worldgate/services/edge/edge"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

func init() { parts = append(parts, part{"edge", startEdge}) }

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

// consoleRoutes are extra routes of edge under `worldgate dev` (the /play console); set by the
// console's file.
var consoleRoutes func(st *stack, key string) map[string]http.Handler

// startEdge serves edge, the HTTP API, as its own NATS user, with a dev key of every scope.
func startEdge(_ context.Context, st *stack) error {
	key, err := devEdgeKey(st.f.dataDir)
	if err != nil {
		return err
	}
	ring, err := edge.NewKeyring([]edge.Key{{Name: "dev", Secret: key, Scopes: []string{edge.ScopePublish, edge.ScopeReadAll}, Rate: 200}})
	if err != nil {
		return err
	}
	nc, js, err := st.connectAs(natsauth.Edge)
	if err != nil {
		return err
	}
	var extra map[string]http.Handler
	if consoleRoutes != nil {
		extra = consoleRoutes(st, key)
	}
	srv, err := edge.New(edge.Config{JetStream: js, Keys: ring, Logger: st.log.With("component", "edge"), Registerer: st.reg, Extra: extra})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(st.f.host, strconv.Itoa(st.f.edgePort)))
	if err != nil {
		return portHint(err, "edge-port", st.f.edgePort)
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
			st.log.Error("edge stopped", "err", err)
		}
	}()
	st.onStop(func() {
		cancel()
		<-done
		_ = svc.Stop()
	})
	st.endpoints["edge.url"] = url
	st.endpoints["edge.key"] = key
	st.edgeURL, st.edgeKey = url, key
	return nil
}
