package mcpx

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// Scopes understood by the Worldgate MCP servers. Each server requires exactly
// one of them on every HTTP request.
const (
	ScopeWorldRead    = "world:read"
	ScopeLoreRead     = "lore:read"
	ScopeClassifyRead = "classify:read"
	// ScopePropose lets a client create proposals through mcp-propose.
	ScopePropose = "propose"
)

// Principal is an authenticated caller.
type Principal struct {
	// Subject names the caller (e.g. "ai-worker"); it keys the rate limiter
	// and appears in logs. It is never a metric label.
	Subject string
	Scopes  []string
	// Players are the players the caller may act for (the token's ClaimPlayers; a token
	// file's "players"): mcp-propose enqueues a narrator's world events about these only.
	Players []string
	// Expires is zero for static tokens.
	Expires time.Time
	// Audience is the token's aud claim (empty for static tokens).
	Audience []string
	// Issuer is the token's iss claim (empty for static tokens).
	Issuer string
}

// Keys of the SDK's TokenInfo.Extra (tool handlers read the caller from
// RequestExtra.TokenInfo: UserID is the subject): the token's issuer, and the players it
// may act for ([]string; TokenPlayers reads them).
const (
	TokenExtraIssuer  = "issuer"
	TokenExtraPlayers = "players"
)

// TokenPlayers returns the players the caller of a tool may act for (Principal.Players), from
// the SDK's token info; none when there is no token.
func TokenPlayers(ti *auth.TokenInfo) []string {
	if ti == nil {
		return nil
	}
	p, _ := ti.Extra[TokenExtraPlayers].([]string)
	return p
}

// HasScope reports whether p holds scope.
func (p *Principal) HasScope(scope string) bool { return p != nil && slices.Contains(p.Scopes, scope) }

// ErrInvalidToken is returned by an Authenticator for a token it does not
// accept (unknown, malformed, badly signed or expired).
var ErrInvalidToken = errors.New("invalid token")

// Authenticator turns a bearer token into a Principal.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*Principal, error)
}

// AuthConfig configures bearer-token authentication. Any of the static
// tokens, the static JWT key and the issuer's JWKS may be set; a token is
// accepted if any of them accepts it. A zero AuthConfig accepts nothing: use
// Disabled for trusted local transports (stdio).
type AuthConfig struct {
	// StaticTokens maps opaque tokens to principals (development keys, a
	// token file).
	StaticTokens map[string]Principal
	// JWTSecret enables HS256 JWTs signed with a shared key (IssueJWT,
	// "<server> issue-token"): the dev mode's static key. Verified by go-jose;
	// sub and exp are required, and aud, when the token has one, must name
	// Resource.
	JWTSecret []byte
	// JWKS validates access tokens an authorization server signed with
	// asymmetric keys (RS*, PS*, ES*, EdDSA): signature against the key set,
	// iss = Issuer, aud contains Resource, exp in the future.
	JWKS   KeySet
	Issuer string
	// Resource is this server's canonical URL (RFC 8707/9728): the audience
	// its tokens must name and the "resource" of its protected-resource
	// metadata. Empty: taken from the request for the metadata; required
	// with JWKS.
	Resource string
	// AuthorizationServers are advertised in the protected-resource metadata
	// (default: Issuer).
	AuthorizationServers []string
	// Disabled turns authentication off (every caller is "anonymous" with all
	// scopes). Only for trusted local use.
	Disabled bool
}

// ForResource returns a copy of c whose tokens must name resource.
func (c AuthConfig) ForResource(resource string) AuthConfig {
	c.Resource = resource
	return c
}

// Enabled reports whether the configuration authenticates anything.
func (c AuthConfig) Enabled() bool { return !c.Disabled }

// Authenticate implements Authenticator.
func (c AuthConfig) Authenticate(ctx context.Context, token string) (*Principal, error) {
	if c.Disabled {
		return &Principal{Subject: "anonymous", Scopes: []string{ScopeWorldRead, ScopeLoreRead, ScopeClassifyRead, ScopePropose}}, nil
	}
	if token == "" {
		return nil, ErrInvalidToken
	}
	for t, p := range c.StaticTokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			pp := p
			pp.Scopes, pp.Players = slices.Clone(p.Scopes), slices.Clone(p.Players)
			return &pp, nil
		}
	}
	if strings.Count(token, ".") != 2 {
		return nil, ErrInvalidToken
	}
	if c.JWKS != nil {
		p, err := c.verifyJWKS(ctx, token, time.Now())
		if err == nil || len(c.JWTSecret) == 0 {
			return p, err
		}
	}
	if len(c.JWTSecret) > 0 {
		p, err := VerifyJWT(c.JWTSecret, token, time.Now())
		if err == nil && c.Resource != "" && len(p.Audience) > 0 && !slices.Contains(p.Audience, c.Resource) {
			return nil, fmt.Errorf("%w: audience %v does not include %s", ErrInvalidToken, p.Audience, c.Resource)
		}
		return p, err
	}
	return nil, ErrInvalidToken
}

// tokenFileEntry is one entry of a token file.
type tokenFileEntry struct {
	Token   string   `json:"token"`
	Subject string   `json:"subject"`
	Scopes  []string `json:"scopes"`
	Players []string `json:"players,omitempty"`
}

// LoadTokenFile reads static tokens from a JSON file of the form
//
//	[{"token": "s3cret", "subject": "ai-worker", "scopes": ["world:read", "lore:read"]},
//	 {"token": "t0ken…", "subject": "gm-assistant", "scopes": ["propose"], "players": ["player:ada"]}]
func LoadTokenFile(path string) (map[string]Principal, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading token file: %w", err)
	}
	var entries []tokenFileEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	out := make(map[string]Principal, len(entries))
	for i, e := range entries {
		if len(e.Token) < 16 {
			return nil, fmt.Errorf("token file %s: entry %d: token shorter than 16 characters", path, i)
		}
		if e.Subject == "" {
			return nil, fmt.Errorf("token file %s: entry %d: subject is required", path, i)
		}
		out[e.Token] = Principal{Subject: e.Subject, Scopes: e.Scopes, Players: e.Players}
	}
	return out, nil
}

type principalKey struct{}

// PrincipalFromContext returns the principal authenticated for this request, if any.
func PrincipalFromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// JSON-RPC error codes used in HTTP error bodies (the project's custom range).
const (
	CodeUnauthorized = -32001
	CodeRateLimited  = -32003
)

// writeAuthError writes a JSON-RPC-shaped error body. The id is null because
// the request was refused before its body was read.
func writeAuthError(w http.ResponseWriter, status int, msg string, data map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": CodeUnauthorized, "message": msg, "data": data},
	})
}

// RequireScope wraps next with bearer-token authentication: no or a bad token
// is answered 401, a token without scope 403, both with a WWW-Authenticate
// header and a JSON-RPC error body. On success the principal is available to
// tool handlers (PrincipalFromContext, and the SDK's RequestExtra.TokenInfo).
func RequireScope(a AuthConfig, scope string, next http.Handler) http.Handler {
	verified := newVerifiedTokens()
	// Hand the principal to the SDK through its own middleware so that the
	// streamable transport binds sessions to the user (session hijack
	// protection) and RequestExtra.TokenInfo is populated.
	sdk := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		p := PrincipalFromContext(ctx)
		if p == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Scopes: p.Scopes, Expiration: p.Expires, UserID: p.Subject, Extra: map[string]any{TokenExtraIssuer: p.Issuer, TokenExtraPlayers: slices.Clone(p.Players)}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true, ClockSkew: ClockSkew})(next)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// RFC 9728 §5.1: the challenge names the metadata, from which an
		// OAuth client discovers the authorization server.
		challenge := fmt.Sprintf(`Bearer realm="worldgate", resource_metadata=%q, scope=%q`,
			metadataURL(resourceURL(a, r, r.URL.Path)), scope)
		token := ""
		if f := strings.Fields(r.Header.Get("Authorization")); len(f) == 2 && strings.EqualFold(f[0], "bearer") {
			token = f[1]
		}
		if token == "" {
			w.Header().Set("WWW-Authenticate", challenge)
			writeAuthError(w, http.StatusUnauthorized, "missing bearer token", map[string]any{"required_scope": scope})
			return
		}
		p, err := verified.authenticate(r.Context(), a, token)
		if err != nil || p == nil {
			w.Header().Set("WWW-Authenticate", challenge+`, error="invalid_token"`)
			writeAuthError(w, http.StatusUnauthorized, "invalid bearer token", map[string]any{"required_scope": scope})
			return
		}
		if !p.HasScope(scope) {
			w.Header().Set("WWW-Authenticate", challenge+`, error="insufficient_scope"`)
			writeAuthError(w, http.StatusForbidden, "missing required scope: "+scope, map[string]any{"required_scope": scope, "token_scopes": p.Scopes})
			return
		}
		sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// VerifiedTokenTTL is how long a verified token's principal is reused without verifying its
// signature again (never past the token's own expiry): a client sends the same token on every
// call, and an ES256 or RS256 signature check costs more than many a tool call. A key removed
// from the authorization server's key set stops being honoured within this time.
const VerifiedTokenTTL = time.Minute

// verifiedTokens remembers the principals of tokens verified in the last VerifiedTokenTTL,
// keyed by the token's SHA-256 (at most 4096, least recently used forgotten first). Refusals
// are not remembered: a bad token is verified, and refused, every time.
type verifiedTokens struct {
	lru *expirable.LRU[[sha256.Size]byte, *Principal]
	now func() time.Time
}

func newVerifiedTokens() *verifiedTokens {
	return &verifiedTokens{lru: expirable.NewLRU[[sha256.Size]byte, *Principal](4096, nil, VerifiedTokenTTL), now: time.Now}
}

// authenticate is a.Authenticate, reusing a recent verification of the same token while the
// token has not expired.
func (v *verifiedTokens) authenticate(ctx context.Context, a Authenticator, token string) (*Principal, error) {
	key := sha256.Sum256([]byte(token))
	if p, ok := v.lru.Get(key); ok {
		if p.Expires.IsZero() || v.now().Before(p.Expires.Add(ClockSkew)) {
			return p.clone(), nil
		}
		v.lru.Remove(key)
	}
	p, err := a.Authenticate(ctx, token)
	if err != nil || p == nil {
		return p, err
	}
	v.lru.Add(key, p.clone())
	return p, nil
}

func (p *Principal) clone() *Principal {
	c := *p
	c.Scopes, c.Audience, c.Players = slices.Clone(p.Scopes), slices.Clone(p.Audience), slices.Clone(p.Players)
	return &c
}
