package main

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

func init() { parts = append(parts, part{"mcp servers", startMCP}) }

// startMCP serves the three read-only MCP servers on one port, at /mcp/world, /mcp/lore and
// /mcp/classify, behind bearer tokens signed with a secret kept in the data directory.
func startMCP(ctx context.Context, st *stack) error {
	secret, err := devSecret(filepath.Join(st.f.dataDir, "mcp-jwt.secret"))
	if err != nil {
		return err
	}
	token, err := mcpx.IssueJWT(secret, "worldgate-dev", []string{mcpx.ScopeWorldRead, mcpx.ScopeLoreRead, mcpx.ScopeClassifyRead}, 30*24*time.Hour)
	if err != nil {
		return err
	}
	// Rate-limited like the standalone servers (their defaults: -rate 50 -burst 100 per token).
	common := mcpx.Options{Logger: st.log.With("component", "mcp"), Registerer: st.reg, Auth: mcpx.AuthConfig{JWTSecret: secret},
		RateLimit: devMCPRateLimit}
	st.graphRO, err = graphx.Open(graphx.Settings{ReadOnly: true, URL: st.graph.URL(), Username: devGraphReader, Password: devGraphReaderPassword})
	if err != nil {
		return err
	}
	st.onStop(st.graphRO.Close)

	_, js, err := st.connectAs(natsauth.MCPWorld)
	if err != nil {
		return err
	}
	world, err := worldtools.New(worldtools.Options{Options: common, GraphConn: st.graphRO, JetStream: js})
	if err != nil {
		return err
	}
	lore, err := loretools.New(loretools.Options{Options: common, GraphConn: st.graphRO, RefreshInterval: 5 * time.Second})
	if err != nil {
		return err
	}
	classify, err := classifytools.New(classifytools.Options{Options: common})
	if err != nil {
		return err
	}
	st.lore = lore
	st.goRun("mcp-lore refresh", func(ctx context.Context) error { lore.Run(ctx); return nil })

	mux := http.NewServeMux()
	mux.Handle("/mcp/world", world.Handler())
	mux.Handle("/mcp/lore", lore.Handler())
	mux.Handle("/mcp/classify", classify.Handler())
	ln, err := net.Listen("tcp", net.JoinHostPort(st.f.host, strconv.Itoa(st.f.mcpPort)))
	if err != nil {
		return portHint(err, "mcp-port", st.f.mcpPort)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			st.log.Error("MCP server stopped", "err", err)
		}
	}()
	st.onStop(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(c)
	})
	base := "http://" + ln.Addr().String()
	st.mcpURLs = map[string]string{"world": base + "/mcp/world", "lore": base + "/mcp/lore", "classify": base + "/mcp/classify"}
	st.mcpToken = token
	st.endpoints["mcp.world.url"] = st.mcpURLs["world"]
	st.endpoints["mcp.lore.url"] = st.mcpURLs["lore"]
	st.endpoints["mcp.classify.url"] = st.mcpURLs["classify"]
	st.endpoints["mcp.token"] = token
	return nil
}

// devMCPRateLimit is the standalone MCP servers' default per-token limit.
var devMCPRateLimit = mcpx.RateLimit{PerSecond: 50, Burst: 100}

// devSecret reads the dev token-signing secret, creating it on first start.
func devSecret(path string) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return b, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return b, os.WriteFile(path, b, 0o600)
}
