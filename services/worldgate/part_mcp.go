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
	"github.com/worldgate/worldgate/services/mcp-propose/proposetools"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/issuer"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

func init() { parts = append(parts, part{"mcp servers", startMCP}) }

// startMCP serves the three read-only MCP servers on one port, at /mcp/world, /mcp/lore and
// /mcp/classify, and the narrators' proposal server at /mcp/propose (scope propose, granted
// only to its own dev client), with the dev token issuer beside them (OAuth authorization server metadata,
// client_credentials token endpoint, JWKS): each server publishes its protected-resource
// metadata and accepts the issuer's ES256 tokens naming it as audience, and the static dev key
// (HS256 tokens signed with a secret kept in the data directory).
func startMCP(ctx context.Context, st *stack) error {
	secret, err := devSecret(filepath.Join(st.f.dataDir, "mcp-jwt.secret"))
	if err != nil {
		return err
	}
	key, err := issuer.LoadOrCreateKey(filepath.Join(st.f.dataDir, "mcp-issuer.jwk"))
	if err != nil {
		return err
	}
	clientSecret, err := devClientSecret(filepath.Join(st.f.dataDir, "mcp-client.secret"))
	if err != nil {
		return err
	}
	narratorSecret, err := devClientSecret(filepath.Join(st.f.dataDir, "mcp-narrator.secret"))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(st.f.host, strconv.Itoa(st.f.mcpPort)))
	if err != nil {
		return portHint(err, "mcp-port", st.f.mcpPort)
	}
	base := "http://" + ln.Addr().String()
	st.mcpURLs = map[string]string{"world": base + "/mcp/world", "lore": base + "/mcp/lore", "classify": base + "/mcp/classify", "propose": base + "/mcp/propose"}
	readScopes := []string{mcpx.ScopeWorldRead, mcpx.ScopeLoreRead, mcpx.ScopeClassifyRead}
	iss, err := issuer.New(issuer.Config{URL: base, Key: key, TTL: time.Hour,
		Clients: []issuer.Client{{ID: devClientID, Secret: clientSecret, Scopes: readScopes},
			{ID: devNarratorID, Secret: narratorSecret, Scopes: []string{mcpx.ScopePropose}}},
		Resources: []issuer.Resource{
			{URL: st.mcpURLs["world"], Scope: mcpx.ScopeWorldRead},
			{URL: st.mcpURLs["lore"], Scope: mcpx.ScopeLoreRead},
			{URL: st.mcpURLs["classify"], Scope: mcpx.ScopeClassifyRead},
			{URL: st.mcpURLs["propose"], Scope: mcpx.ScopePropose},
		}})
	if err != nil {
		_ = ln.Close()
		return err
	}
	token, err := iss.Mint("worldgate-dev", readScopes, []string{st.mcpURLs["world"], st.mcpURLs["lore"], st.mcpURLs["classify"]}, 30*24*time.Hour)
	if err != nil {
		_ = ln.Close()
		return err
	}
	auth := mcpx.AuthConfig{JWTSecret: secret, JWKS: mcpx.StaticKeySet{Set: iss.JWKS()}, Issuer: iss.URL(), Disabled: st.f.mcpNoAuth}
	if st.f.mcpNoAuth {
		st.log.Warn("MCP servers without authentication (-mcp-no-auth): local development only")
	}
	common := mcpx.Options{Logger: st.log.With("component", "mcp"), Registerer: st.reg, RateLimit: mcpx.RateLimit{PerSecond: 50, Burst: 100}}
	opts := func(name string) mcpx.Options {
		o := common
		o.Auth = auth.ForResource(st.mcpURLs[name])
		return o
	}
	st.graphRO, err = graphx.Open(graphx.Settings{ReadOnly: true, URL: st.graph.URL(), Username: devGraphReader, Password: devGraphReaderPassword})
	if err != nil {
		_ = ln.Close()
		return err
	}
	st.onStop(st.graphRO.Close)

	_, js, err := st.connectAs(natsauth.MCPWorld)
	if err != nil {
		_ = ln.Close()
		return err
	}
	world, err := worldtools.New(worldtools.Options{Options: opts("world"), GraphConn: st.graphRO, JetStream: js})
	if err != nil {
		_ = ln.Close()
		return err
	}
	lore, err := loretools.New(loretools.Options{Options: opts("lore"), GraphConn: st.graphRO, RefreshInterval: 5 * time.Second})
	if err != nil {
		_ = ln.Close()
		return err
	}
	classify, err := classifytools.New(classifytools.Options{Options: opts("classify")})
	if err != nil {
		_ = ln.Close()
		return err
	}
	_, pjs, err := st.connectAs(natsauth.MCPPropose)
	if err != nil {
		_ = ln.Close()
		return err
	}
	propose, err := proposetools.New(proposetools.Options{Options: opts("propose"), JetStream: pjs})
	if err != nil {
		_ = ln.Close()
		return err
	}
	st.lore = lore
	st.goRun("mcp-lore refresh", func(ctx context.Context) error { lore.Run(ctx); return nil })

	mux := http.NewServeMux()
	mcpx.Mount(mux, "/mcp/world", world.Handler(), opts("world").Auth, mcpx.ScopeWorldRead)
	mcpx.Mount(mux, "/mcp/lore", lore.Handler(), opts("lore").Auth, mcpx.ScopeLoreRead)
	mcpx.Mount(mux, "/mcp/classify", classify.Handler(), opts("classify").Auth, mcpx.ScopeClassifyRead)
	mcpx.Mount(mux, "/mcp/propose", propose.Handler(), opts("propose").Auth, mcpx.ScopePropose)
	ih := iss.Handler()
	for _, p := range []string{issuer.MetadataPath, issuer.TokenPath, issuer.JWKSPath} {
		mux.Handle(p, ih)
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
	st.mcpToken = token
	st.endpoints["mcp.world.url"] = st.mcpURLs["world"]
	st.endpoints["mcp.lore.url"] = st.mcpURLs["lore"]
	st.endpoints["mcp.classify.url"] = st.mcpURLs["classify"]
	st.endpoints["mcp.propose.url"] = st.mcpURLs["propose"]
	st.endpoints["mcp.narrator.client.id"] = devNarratorID
	st.endpoints["mcp.narrator.client.secret"] = narratorSecret
	st.endpoints["mcp.token"] = token
	st.endpoints["mcp.issuer"] = iss.URL()
	st.endpoints["mcp.client.id"] = devClientID
	st.endpoints["mcp.client.secret"] = clientSecret
	return nil
}

// devClientID is the dev issuer's client for outside MCP clients (the MCP Inspector, an
// editor): client_credentials with the read scopes.
const devClientID = "worldgate-dev-client"

// devNarratorID is the dev issuer's client for outside narrators: client_credentials with
// scope propose only (mcp-propose), none of the read scopes.
const devNarratorID = "worldgate-dev-narrator"

// devClientSecret reads the dev client's secret, creating it on first start.
func devClientSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return string(b), nil
	}
	s := issuer.NewSecret()
	return s, os.WriteFile(path, []byte(s), 0o600)
}

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
