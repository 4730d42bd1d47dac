package mcpx_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/mcpx/issuer"
)

func echoServer(t *testing.T) *mcp.Server {
	t.Helper()
	s, err := mcpx.NewServer("world", "test", "", mcpx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Annotations: mcpx.ReadOnly("Echo"), InputSchema: mcpx.InputSchema[echoIn](nil)},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			said := in.Say + " to " + req.Extra.TokenInfo.UserID
			if players := mcpx.TokenPlayers(req.Extra.TokenInfo); len(players) > 0 {
				said += " for " + strings.Join(players, ",")
			}
			return nil, echoOut{Said: said}, nil
		})
	return s
}

type flow struct {
	ts                 *httptest.Server
	iss                *issuer.Issuer
	worldURL, loreURL  string
	worldAuth, loreAth mcpx.AuthConfig
	key                *ecdsa.PrivateKey
}

// newFlow serves, on one port, the dev issuer and two MCP endpoints whose
// tokens are checked against the issuer's JWKS fetched over HTTP.
func newFlow(t *testing.T) *flow {
	t.Helper()
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	f := &flow{ts: ts, worldURL: ts.URL + "/mcp/world", loreURL: ts.URL + "/mcp/lore"}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f.key = key
	iss, err := issuer.New(issuer.Config{URL: ts.URL, TTL: time.Minute, Key: key,
		Clients: []issuer.Client{
			{ID: "reader", Secret: "reader-secret", Scopes: []string{mcpx.ScopeWorldRead}},
			{ID: "lorist", Secret: "lorist-secret", Scopes: []string{mcpx.ScopeLoreRead}},
			{ID: "narrator", Secret: "narrator-secret", Scopes: []string{mcpx.ScopeWorldRead}, Players: []string{"player:ada", "player:bob"}},
		},
		Resources: []issuer.Resource{{URL: f.worldURL, Scope: mcpx.ScopeWorldRead}, {URL: f.loreURL, Scope: mcpx.ScopeLoreRead}}})
	if err != nil {
		t.Fatal(err)
	}
	f.iss = iss
	keys := &mcpx.RemoteKeySet{URL: ts.URL + issuer.JWKSPath}
	base := mcpx.AuthConfig{JWKS: keys, Issuer: ts.URL}
	f.worldAuth, f.loreAth = base.ForResource(f.worldURL), base.ForResource(f.loreURL)
	mux.Handle(issuer.MetadataPath, iss.Handler())
	mux.Handle(issuer.TokenPath, iss.Handler())
	mux.Handle(issuer.JWKSPath, iss.Handler())
	mcpx.Mount(mux, "/mcp/world", mcpx.HTTPHandler(echoServer(t), mcpx.HTTPOptions{Auth: f.worldAuth, Scope: mcpx.ScopeWorldRead}), f.worldAuth, mcpx.ScopeWorldRead)
	mcpx.Mount(mux, "/mcp/lore", mcpx.HTTPHandler(echoServer(t), mcpx.HTTPOptions{Auth: f.loreAth, Scope: mcpx.ScopeLoreRead}), f.loreAth, mcpx.ScopeLoreRead)
	return f
}

func TestOAuthDiscoveryAndClientCredentials(t *testing.T) {
	f := newFlow(t)
	ctx := context.Background()

	// The official client: 401 -> resource_metadata -> authorization server
	// metadata -> client_credentials token -> the call.
	h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
		Credentials: &oauthex.ClientCredentials{ClientID: "reader", ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: "reader-secret"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "narrator", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.worldURL, OAuthHandler: h, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect through discovery: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"say": "hello"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	var out echoOut
	structured(t, res, &out)
	if out.Said != "hello to reader" {
		t.Fatalf("said %q; the tool should see the client id as the caller", out.Said)
	}

	// The same client cannot reach the lore server: its scopes do not include lore:read.
	h2, _ := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
		Credentials: &oauthex.ClientCredentials{ClientID: "reader", ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: "reader-secret"}}})
	if _, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.loreURL, OAuthHandler: h2, DisableStandaloneSSE: true}, nil); err == nil {
		t.Fatal("a client without lore:read connected to the lore server")
	}

	// Protected-resource metadata at the path-suffixed well-known URL.
	resp, err := http.Get(f.ts.URL + mcpx.WellKnownProtectedResource + "/mcp/world")
	if err != nil {
		t.Fatal(err)
	}
	var prm oauthex.ProtectedResourceMetadata
	_ = json.NewDecoder(resp.Body).Decode(&prm)
	resp.Body.Close()
	if prm.Resource != f.worldURL || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != f.ts.URL || len(prm.ScopesSupported) != 1 || prm.ScopesSupported[0] != mcpx.ScopeWorldRead {
		t.Fatalf("metadata %+v", prm)
	}
}

func TestTokensForAnotherAudienceOrScopeRefused(t *testing.T) {
	f := newFlow(t)
	other, err := issuer.New(issuer.Config{URL: f.ts.URL}) // same issuer name, another key
	if err != nil {
		t.Fatal(err)
	}
	loreTok := token(t, f.ts.URL, "lorist", "lorist-secret", url.Values{})
	good, _ := f.iss.Mint("reader", []string{mcpx.ScopeWorldRead}, []string{f.worldURL}, time.Minute)
	noScope, _ := f.iss.Mint("reader", []string{mcpx.ScopeLoreRead}, []string{f.worldURL}, time.Minute)
	forged, _ := other.Mint("reader", []string{mcpx.ScopeWorldRead}, []string{f.worldURL}, time.Minute)
	wrongIss, _ := issuerNamed(t, f, "http://elsewhere.example").Mint("reader", []string{mcpx.ScopeWorldRead}, []string{f.worldURL}, time.Minute)
	for _, tc := range []struct {
		name, tok string
		status    int
		wwwAuth   string
	}{
		{"lore token at world", loreTok, 401, `error="invalid_token"`},
		{"world audience without world:read", noScope, 403, `error="insufficient_scope"`},
		{"signed with another key", forged, 401, `error="invalid_token"`},
		{"another issuer", wrongIss, 401, `error="invalid_token"`},
		{"none", "", 401, `resource_metadata="` + f.ts.URL + `/.well-known/oauth-protected-resource/mcp/world"`},
		{"good", good, 200, ""},
	} {
		req, _ := http.NewRequest(http.MethodPost, f.worldURL, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.tok != "" {
			req.Header.Set("Authorization", "Bearer "+tc.tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(resp.Header.Get("WWW-Authenticate"), tc.wwwAuth) {
			t.Errorf("%s: %d %q %s; want %d with %s", tc.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, tc.status, tc.wwwAuth)
		}
	}
}

func issuerNamed(t *testing.T, f *flow, name string) *issuer.Issuer {
	t.Helper()
	// The flow's key under another issuer name: only iss differs.
	i, err := issuer.New(issuer.Config{URL: name, Key: f.key})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// token asks the dev issuer for a client_credentials token.
func token(t *testing.T, base, id, secret string, form url.Values) string {
	t.Helper()
	status, body := tokenRequest(t, base, id, secret, form)
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, body)
	}
	return body["access_token"].(string)
}

func tokenRequest(t *testing.T, base, id, secret string, form url.Values) (int, map[string]any) {
	t.Helper()
	if form.Get("grant_type") == "" {
		form.Set("grant_type", "client_credentials")
	}
	req, _ := http.NewRequest(http.MethodPost, base+issuer.TokenPath, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func TestDevIssuerRefusesBadRequests(t *testing.T) {
	f := newFlow(t)
	for _, tc := range []struct {
		name, id, secret string
		form             url.Values
		status           int
		code             string
	}{
		{"wrong secret", "reader", "nope", url.Values{}, 401, "invalid_client"},
		{"unknown client", "ghost", "x", url.Values{}, 401, "invalid_client"},
		{"password grant", "reader", "reader-secret", url.Values{"grant_type": {"password"}}, 400, "unsupported_grant_type"},
		{"scope not allowed", "reader", "reader-secret", url.Values{"scope": {"world:read propose"}}, 400, "invalid_scope"},
		{"unknown resource", "reader", "reader-secret", url.Values{"resource": {"http://elsewhere.example/mcp"}}, 400, "invalid_target"},
		{"resource beyond scope", "reader", "reader-secret", url.Values{"resource": {f.loreURL}}, 400, "invalid_target"},
	} {
		status, body := tokenRequest(t, f.ts.URL, tc.id, tc.secret, tc.form)
		if status != tc.status || body["error"] != tc.code {
			t.Errorf("%s: %d %v; want %d %s", tc.name, status, body, tc.status, tc.code)
		}
	}
	// A resource the client may reach narrows the audience to it.
	tok := token(t, f.ts.URL, "reader", "reader-secret", url.Values{"resource": {f.worldURL}})
	p, err := f.worldAuth.Authenticate(context.Background(), tok)
	if err != nil || p.Subject != "reader" || len(p.Audience) != 1 || p.Audience[0] != f.worldURL {
		t.Fatalf("%+v %v", p, err)
	}
}

// The players a client may act for travel in its access token (the players claim, signed by
// the issuer with go-jose) to the tool handler; a client registered without players gets a
// token that names none.
func TestDevIssuerNamesTheClientsPlayers(t *testing.T) {
	f := newFlow(t)
	ctx := context.Background()
	p, err := f.worldAuth.Authenticate(ctx, token(t, f.ts.URL, "narrator", "narrator-secret", url.Values{}))
	if err != nil || p.Subject != "narrator" || strings.Join(p.Players, " ") != "player:ada player:bob" {
		t.Fatalf("narrator's token: %+v %v", p, err)
	}
	if p, err := f.worldAuth.Authenticate(ctx, token(t, f.ts.URL, "reader", "reader-secret", url.Values{})); err != nil || len(p.Players) != 0 {
		t.Fatalf("reader's token: %+v %v", p, err)
	}
	h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
		Credentials: &oauthex.ClientCredentials{ClientID: "narrator", ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: "narrator-secret"}}})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "narrator", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: f.worldURL, OAuthHandler: h, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"say": "hello"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	var out echoOut
	structured(t, res, &out)
	if out.Said != "hello to narrator for player:ada,player:bob" {
		t.Fatalf("said %q; the tool should see the token's players", out.Said)
	}
	// A static-key token says the same (IssueToken, "<server> issue-token -players").
	tok, err := mcpx.IssueToken(secret, mcpx.Token{Subject: "gm", Scopes: []string{mcpx.ScopePropose}, Players: []string{"player:ada"}, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := mcpx.VerifyJWT(secret, tok, time.Now()); err != nil || strings.Join(p.Players, " ") != "player:ada" {
		t.Fatalf("static-key token: %+v %v", p, err)
	}
}
