package stack

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/services/mcp-lore/loretools"
	"github.com/worldgate/worldgate/services/mcp-propose/proposetools"
	"github.com/worldgate/worldgate/services/mcp-world/worldtools"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/issuer"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// MCP serves the three read-only MCP servers on one port, at /mcp/world, /mcp/lore and
// /mcp/classify, and the narrators' proposal server at /mcp/propose (scope propose, granted
// only to its own dev client), with the dev token issuer beside them (OAuth authorization server metadata,
// client_credentials token endpoint, JWKS): each server publishes its protected-resource
// metadata and accepts the issuer's ES256 tokens naming it as audience, and the static dev key
// (HS256 tokens signed with a secret kept in the data directory).
var MCP = Part{"mcp servers", startMCP}

func startMCP(ctx context.Context, st *Stack) error {
	secret, err := devSecret(filepath.Join(st.DataDir, "mcp-jwt.secret"))
	if err != nil {
		return err
	}
	key, err := issuer.LoadOrCreateKey(filepath.Join(st.DataDir, "mcp-issuer.jwk"))
	if err != nil {
		return err
	}
	clientSecret, err := devClientSecret(filepath.Join(st.DataDir, "mcp-client.secret"))
	if err != nil {
		return err
	}
	narratorSecret, err := devClientSecret(filepath.Join(st.DataDir, "mcp-narrator.secret"))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(st.Host, strconv.Itoa(st.MCPPort)))
	if err != nil {
		return portHint(err, "mcp-port", st.MCPPort)
	}
	base := "http://" + ln.Addr().String()
	st.MCPURLs = map[string]string{"world": base + "/mcp/world", "lore": base + "/mcp/lore", "classify": base + "/mcp/classify", "propose": base + "/mcp/propose"}
	readScopes := []string{mcpx.ScopeWorldRead, mcpx.ScopeLoreRead, mcpx.ScopeClassifyRead}
	iss, err := issuer.New(issuer.Config{URL: base, Key: key, TTL: time.Hour,
		Clients: []issuer.Client{{ID: devClientID, Secret: clientSecret, Scopes: readScopes},
			{ID: devNarratorID, Secret: narratorSecret, Scopes: []string{mcpx.ScopePropose}}},
		Resources: []issuer.Resource{
			{URL: st.MCPURLs["world"], Scope: mcpx.ScopeWorldRead},
			{URL: st.MCPURLs["lore"], Scope: mcpx.ScopeLoreRead},
			{URL: st.MCPURLs["classify"], Scope: mcpx.ScopeClassifyRead},
			{URL: st.MCPURLs["propose"], Scope: mcpx.ScopePropose},
		}})
	if err != nil {
		_ = ln.Close()
		return err
	}
	// Two read tokens, two clients: the one endpoints.json hands to outside clients and the
	// in-process workers' own. Rate limits count per client, so a flood with the published
	// token cannot spend the workers' budget (issue 38).
	readAudience := []string{st.MCPURLs["world"], st.MCPURLs["lore"], st.MCPURLs["classify"]}
	token, err := iss.Mint(devTokenSubject, readScopes, readAudience, 30*24*time.Hour)
	if err != nil {
		_ = ln.Close()
		return err
	}
	workerToken, err := iss.Mint(devWorkersSubject, readScopes, readAudience, 30*24*time.Hour)
	if err != nil {
		_ = ln.Close()
		return err
	}
	auth := mcpx.AuthConfig{JWTSecret: secret, JWKS: mcpx.StaticKeySet{Set: iss.JWKS()}, Issuer: iss.URL(), Disabled: st.MCPNoAuth}
	if st.MCPNoAuth {
		st.Log.Warn("MCP servers without authentication (-mcp-no-auth): local development only")
	}
	rate := mcpx.RateLimit{PerSecond: 50, Burst: 100}
	if st.MCPRateLimit != nil {
		rate = *st.MCPRateLimit
	}
	common := mcpx.Options{Logger: st.Log.With("component", "mcp"), Registerer: st.Reg, RateLimit: rate}
	opts := func(name string) mcpx.Options {
		o := common
		o.Auth = auth.ForResource(st.MCPURLs[name])
		return o
	}
	st.GraphRO, err = st.OpenGraph(GraphReader)
	if err != nil {
		_ = ln.Close()
		return err
	}

	wnc, js, err := st.ConnectAs(natsauth.MCPWorld)
	if err != nil {
		_ = ln.Close()
		return err
	}
	// Each server is started as its process starts it ({world,lore,classify,propose}tools.Start),
	// on the stack's graph reader and its own NATS user, with its default configuration.
	world, err := worldtools.Start(ctx, service.MCPInfra{Options: opts("world"), Conn: wnc, JetStream: js, Graph: st.GraphRO}, worldtools.DefaultServiceConfig())
	if err != nil {
		_ = ln.Close()
		return err
	}
	loreCfg := loretools.DefaultServiceConfig()
	loreCfg.Refresh = 5 * time.Second // a world just loaded is searchable soon
	lore, err := loretools.Open(ctx, service.MCPInfra{Options: opts("lore"), Graph: st.GraphRO}, loreCfg)
	if err != nil {
		_ = ln.Close()
		return err
	}
	classify, err := classifytools.Start(ctx, service.MCPInfra{Options: opts("classify")}, classifytools.DefaultServiceConfig())
	if err != nil {
		_ = ln.Close()
		return err
	}
	pnc, pjs, err := st.ConnectAs(natsauth.MCPPropose)
	if err != nil {
		_ = ln.Close()
		return err
	}
	propose, err := proposetools.Start(ctx, service.MCPInfra{Options: opts("propose"), Conn: pnc, JetStream: pjs}, proposetools.DefaultServiceConfig())
	if err != nil {
		_ = ln.Close()
		return err
	}
	// Each server registers with NATS service discovery as its own user, as the binaries do
	// (worldgate status lists them with their health).
	lnc, _, err := st.ConnectAs(natsauth.MCPLore)
	if err != nil {
		_ = ln.Close()
		return err
	}
	cnc, _, err := st.ConnectAs(natsauth.MCPClassify)
	if err != nil {
		_ = ln.Close()
		return err
	}
	for _, r := range []struct {
		nc      *nats.Conn
		service string
		ready   mcpx.Readiness
	}{{wnc, natsauth.MCPWorld, world.Ready}, {lnc, natsauth.MCPLore, lore.Ready}, {cnc, natsauth.MCPClassify, classify.Ready}, {pnc, natsauth.MCPPropose, propose.Ready}} {
		svc, err := mcpx.Register(r.nc, r.service, "0.0.0-dev", "http", r.ready)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("register %s with NATS service discovery: %w", r.service, err)
		}
		st.OnStop(func() { _ = svc.Stop() })
	}
	st.Lore = lore
	// The stack's own workers (ai-worker, the safety gate, the console) call the read servers
	// in process; outside clients (and propose's narrators) use HTTP.
	st.MCPServers = map[string]*mcp.Server{"world": world.MCP, "lore": lore.MCP(), "classify": classify.MCP}
	st.Go("mcp-lore refresh", func(ctx context.Context) error { lore.Run(ctx); return nil })

	mux := http.NewServeMux()
	mcpx.Mount(mux, "/mcp/world", world.Handler, opts("world").Auth, mcpx.ScopeWorldRead)
	mcpx.Mount(mux, "/mcp/lore", lore.Handler(), opts("lore").Auth, mcpx.ScopeLoreRead)
	mcpx.Mount(mux, "/mcp/classify", classify.Handler, opts("classify").Auth, mcpx.ScopeClassifyRead)
	mcpx.Mount(mux, "/mcp/propose", propose.Handler, opts("propose").Auth, mcpx.ScopePropose)
	ih := iss.Handler()
	for _, p := range []string{issuer.MetadataPath, issuer.TokenPath, issuer.JWKSPath} {
		mux.Handle(p, ih)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			st.Log.Error("MCP server stopped", "err", err)
		}
	}()
	st.OnStop(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(c)
	})
	st.MCPToken = workerToken
	st.Endpoints["mcp.world.url"] = st.MCPURLs["world"]
	st.Endpoints["mcp.lore.url"] = st.MCPURLs["lore"]
	st.Endpoints["mcp.classify.url"] = st.MCPURLs["classify"]
	st.Endpoints["mcp.propose.url"] = st.MCPURLs["propose"]
	st.Endpoints["mcp.narrator.client.id"] = devNarratorID
	st.Endpoints["mcp.narrator.client.secret"] = narratorSecret
	st.Endpoints["mcp.token"] = token
	st.Endpoints["mcp.issuer"] = iss.URL()
	st.Endpoints["mcp.client.id"] = devClientID
	st.Endpoints["mcp.client.secret"] = clientSecret
	return nil
}

// Subjects of the dev stack's minted read tokens: the one published in endpoints.json
// ("mcp.token") for outside clients, and the in-process workers' own (Stack.MCPToken), each its
// own client to the rate limiter.
const (
	devTokenSubject   = "worldgate-dev"
	devWorkersSubject = "worldgate-dev-workers"
)

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
