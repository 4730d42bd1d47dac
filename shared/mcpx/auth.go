package mcpx

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// Scopes understood by the Worldgate MCP servers. Each server requires exactly
// one of them on every HTTP request.
const (
	ScopeWorldRead    = "world:read"
	ScopeLoreRead     = "lore:read"
	ScopeClassifyRead = "classify:read"
)

// Principal is an authenticated caller.
type Principal struct {
	// Subject names the caller (e.g. "ai-worker"); it keys the rate limiter
	// and appears in logs. It is never a metric label.
	Subject string
	Scopes  []string
	// Expires is zero for static tokens.
	Expires time.Time
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

// AuthConfig configures bearer-token authentication. Either or both of the
// static tokens and an HS256 JWT secret may be set; a token is accepted if any
// of them accepts it. A zero AuthConfig accepts nothing: use Disabled for
// trusted local transports (stdio).
type AuthConfig struct {
	// StaticTokens maps opaque tokens to principals.
	StaticTokens map[string]Principal
	// JWTSecret enables HS256 JWTs issued by IssueJWT (or any HS256 issuer
	// using the claims sub, scope (space separated) and exp).
	JWTSecret []byte
	// Disabled turns authentication off (every caller is "anonymous" with all
	// scopes). Only for trusted local use.
	Disabled bool
}

// Enabled reports whether the configuration authenticates anything.
func (c AuthConfig) Enabled() bool { return !c.Disabled }

// Authenticate implements Authenticator.
func (c AuthConfig) Authenticate(_ context.Context, token string) (*Principal, error) {
	if c.Disabled {
		return &Principal{Subject: "anonymous", Scopes: []string{ScopeWorldRead, ScopeLoreRead, ScopeClassifyRead}}, nil
	}
	if token == "" {
		return nil, ErrInvalidToken
	}
	for t, p := range c.StaticTokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			pp := p
			pp.Scopes = slices.Clone(p.Scopes)
			return &pp, nil
		}
	}
	if len(c.JWTSecret) > 0 && strings.Count(token, ".") == 2 {
		return VerifyJWT(c.JWTSecret, token, time.Now())
	}
	return nil, ErrInvalidToken
}

// tokenFileEntry is one entry of a token file.
type tokenFileEntry struct {
	Token   string   `json:"token"`
	Subject string   `json:"subject"`
	Scopes  []string `json:"scopes"`
}

// LoadTokenFile reads static tokens from a JSON file of the form
//
//	[{"token": "s3cret", "subject": "ai-worker", "scopes": ["world:read", "lore:read"]}]
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
		out[e.Token] = Principal{Subject: e.Subject, Scopes: e.Scopes}
	}
	return out, nil
}

type jwtHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ,omitempty"`
}

type jwtClaims struct {
	Sub   string `json:"sub"`
	Scope string `json:"scope"`
	Exp   int64  `json:"exp"`
	Iat   int64  `json:"iat,omitempty"`
	Iss   string `json:"iss,omitempty"`
}

var b64 = base64.RawURLEncoding

// IssueJWT signs an HS256 JWT for subject with the given scopes, valid for ttl.
// The secret should be at least 32 random bytes.
func IssueJWT(secret []byte, subject string, scopes []string, ttl time.Duration) (string, error) {
	if len(secret) < 16 {
		return "", errors.New("jwt secret must be at least 16 bytes")
	}
	if subject == "" {
		return "", errors.New("subject is required")
	}
	if ttl <= 0 {
		return "", errors.New("ttl must be positive")
	}
	now := time.Now()
	h, _ := json.Marshal(jwtHeader{Alg: "HS256", Typ: "JWT"})
	c, _ := json.Marshal(jwtClaims{Sub: subject, Scope: strings.Join(scopes, " "), Exp: now.Add(ttl).Unix(), Iat: now.Unix(), Iss: "worldgate"})
	signing := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	return signing + "." + b64.EncodeToString(sign(secret, signing)), nil
}

func sign(secret []byte, s string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// VerifyJWT checks an HS256 JWT's signature and expiry and returns its principal.
func VerifyJWT(secret []byte, token string, now time.Time) (*Principal, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: not a JWT", ErrInvalidToken)
	}
	var h jwtHeader
	hb, err := b64.DecodeString(parts[0])
	if err != nil || json.Unmarshal(hb, &h) != nil || h.Alg != "HS256" {
		return nil, fmt.Errorf("%w: unsupported JWT header", ErrInvalidToken)
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, sign(secret, parts[0]+"."+parts[1])) {
		return nil, fmt.Errorf("%w: bad signature", ErrInvalidToken)
	}
	var c jwtClaims
	cb, err := b64.DecodeString(parts[1])
	if err != nil || json.Unmarshal(cb, &c) != nil {
		return nil, fmt.Errorf("%w: bad claims", ErrInvalidToken)
	}
	if c.Sub == "" || c.Exp == 0 {
		return nil, fmt.Errorf("%w: sub and exp are required", ErrInvalidToken)
	}
	exp := time.Unix(c.Exp, 0)
	if !now.Before(exp) {
		return nil, fmt.Errorf("%w: expired", ErrInvalidToken)
	}
	return &Principal{Subject: c.Sub, Scopes: strings.Fields(c.Scope), Expires: exp}, nil
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
func RequireScope(a Authenticator, scope string, next http.Handler) http.Handler {
	// Hand the principal to the SDK through its own middleware so that the
	// streamable transport binds sessions to the user (session hijack
	// protection) and RequestExtra.TokenInfo is populated.
	sdk := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		p := PrincipalFromContext(ctx)
		if p == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Scopes: p.Scopes, Expiration: p.Expires, UserID: p.Subject}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)

	challenge := fmt.Sprintf(`Bearer realm="worldgate", scope=%q`, scope)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := ""
		if f := strings.Fields(r.Header.Get("Authorization")); len(f) == 2 && strings.EqualFold(f[0], "bearer") {
			token = f[1]
		}
		if token == "" {
			w.Header().Set("WWW-Authenticate", challenge)
			writeAuthError(w, http.StatusUnauthorized, "missing bearer token", map[string]any{"required_scope": scope})
			return
		}
		p, err := a.Authenticate(r.Context(), token)
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
