package mcpx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// AsymmetricAlgorithms are the signature algorithms accepted from a JWKS.
var AsymmetricAlgorithms = []jose.SignatureAlgorithm{
	jose.EdDSA, jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
}

// ClockSkew is the leeway allowed on exp/nbf/iat.
const ClockSkew = 30 * time.Second

// ClaimPlayers is the access-token claim listing the players its client may act for (a list
// of player ids, or one space-separated string): a narrator enqueues world events about those
// players only (mcp-propose). A token without it acts for no player.
const ClaimPlayers = "players"

// accessClaims are the claims read besides the registered ones. Scopes come
// from "scope" (RFC 9068: space separated) or "scp" (a list or a string, as
// some identity providers write it); the subject from sub, else client_id;
// the players from ClaimPlayers.
type accessClaims struct {
	Scope    string          `json:"scope,omitempty"`
	Scp      json.RawMessage `json:"scp,omitempty"`
	ClientID string          `json:"client_id,omitempty"`
	Players  json.RawMessage `json:"players,omitempty"`
}

func (a accessClaims) scopes() []string {
	return append(strings.Fields(a.Scope), listClaim(a.Scp)...)
}

func (a accessClaims) players() []string { return listClaim(a.Players) }

// listClaim reads a claim written as a list of strings or as one space-separated string.
func listClaim(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var list []string
	var one string
	if json.Unmarshal(raw, &list) == nil {
		return list
	} else if json.Unmarshal(raw, &one) == nil {
		return strings.Fields(one)
	}
	return nil
}

// Token is what an HS256 token says (IssueToken).
type Token struct {
	Subject string
	Scopes  []string
	// Players the client may act for (ClaimPlayers).
	Players []string
	TTL     time.Duration
	// Audience, if any, becomes the aud claim: the resources the token is for.
	Audience []string
}

// IssueJWT signs an HS256 JWT (go-jose) for subject with the given scopes,
// valid for ttl; audience, if given, becomes its aud claim. The secret should
// be at least 32 random bytes. This is the static-key path (development,
// tests, "<server> issue-token"); production tokens come from an
// authorization server and are checked against its JWKS.
func IssueJWT(secret []byte, subject string, scopes []string, ttl time.Duration, audience ...string) (string, error) {
	return IssueToken(secret, Token{Subject: subject, Scopes: scopes, TTL: ttl, Audience: audience})
}

// IssueToken is IssueJWT for a token that says more (the players its client may act for).
func IssueToken(secret []byte, t Token) (string, error) {
	if len(secret) < 32 {
		return "", errors.New("jwt secret must be at least 32 bytes")
	}
	if t.Subject == "" {
		return "", errors.New("subject is required")
	}
	if t.TTL <= 0 {
		return "", errors.New("ttl must be positive")
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	now := time.Now()
	std := jwt.Claims{Subject: t.Subject, Issuer: "worldgate", IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(t.TTL)), Audience: t.Audience}
	extra := map[string]any{}
	if len(t.Scopes) > 0 {
		extra["scope"] = strings.Join(t.Scopes, " ")
	}
	if len(t.Players) > 0 {
		extra[ClaimPlayers] = t.Players
	}
	return jwt.Signed(signer).Claims(std).Claims(extra).Serialize()
}

// VerifyJWT checks an HS256 JWT's signature (go-jose) and expiry and returns
// its principal. sub and exp are required.
func VerifyJWT(secret []byte, token string, now time.Time) (*Principal, error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.HS256})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	var std jwt.Claims
	var extra accessClaims
	if err := tok.Claims(secret, &std, &extra); err != nil {
		return nil, fmt.Errorf("%w: bad signature", ErrInvalidToken)
	}
	return principalFrom(std, extra, jwt.Expected{Time: now})
}

func principalFrom(std jwt.Claims, extra accessClaims, want jwt.Expected) (*Principal, error) {
	if std.Expiry == nil {
		return nil, fmt.Errorf("%w: exp is required", ErrInvalidToken)
	}
	if err := std.ValidateWithLeeway(want, ClockSkew); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	sub := std.Subject
	if sub == "" {
		sub = extra.ClientID
	}
	if sub == "" {
		return nil, fmt.Errorf("%w: sub is required", ErrInvalidToken)
	}
	return &Principal{Subject: sub, Scopes: extra.scopes(), Players: extra.players(), Expires: std.Expiry.Time(), Audience: []string(std.Audience), Issuer: std.Issuer}, nil
}

// verifyJWKS validates an access token against the authorization server's
// keys: signature (the key named by kid), iss, aud contains Resource, exp.
func (c AuthConfig) verifyJWKS(ctx context.Context, token string, now time.Time) (*Principal, error) {
	if c.Issuer == "" || c.Resource == "" {
		return nil, fmt.Errorf("%w: the server has no issuer or resource configured", ErrInvalidToken)
	}
	tok, err := jwt.ParseSigned(token, AsymmetricAlgorithms)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	kid := tok.Headers[0].KeyID
	key, err := c.JWKS.Key(ctx, kid)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	var std jwt.Claims
	var extra accessClaims
	if err := tok.Claims(key, &std, &extra); err != nil {
		return nil, fmt.Errorf("%w: bad signature", ErrInvalidToken)
	}
	return principalFrom(std, extra, jwt.Expected{Issuer: c.Issuer, AnyAudience: jwt.Audience{c.Resource}, Time: now})
}

// KeySet finds an authorization server's public key by key id.
type KeySet interface {
	Key(ctx context.Context, kid string) (*jose.JSONWebKey, error)
}

// StaticKeySet is a fixed JWKS (a file, or the in-process dev issuer).
type StaticKeySet struct{ Set jose.JSONWebKeySet }

// Key implements KeySet.
func (s StaticKeySet) Key(_ context.Context, kid string) (*jose.JSONWebKey, error) {
	return pick(s.Set, kid)
}

func pick(set jose.JSONWebKeySet, kid string) (*jose.JSONWebKey, error) {
	var found []jose.JSONWebKey
	if kid != "" {
		found = set.Key(kid)
	} else if len(set.Keys) == 1 {
		found = set.Keys
	}
	for _, k := range found {
		if k.IsPublic() && (k.Use == "" || k.Use == "sig") {
			return &k, nil
		}
	}
	return nil, fmt.Errorf("no public signing key %q in the JWKS", kid)
}

// RemoteKeySet fetches a JWKS over HTTP(S) and refreshes it every Refresh
// (default 10 minutes) and when a token names an unknown key id (at most once
// every MinRefresh, default 30 seconds, so forged kids cannot hammer the
// issuer).
type RemoteKeySet struct {
	URL        string
	Client     *http.Client
	Refresh    time.Duration
	MinRefresh time.Duration

	mu      sync.Mutex
	set     jose.JSONWebKeySet
	fetched time.Time
}

// Key implements KeySet.
func (r *RemoteKeySet) Key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	refresh, minRefresh := r.Refresh, r.MinRefresh
	if refresh <= 0 {
		refresh = 10 * time.Minute
	}
	if minRefresh <= 0 {
		minRefresh = 30 * time.Second
	}
	if time.Since(r.fetched) > refresh {
		if err := r.fetch(ctx); err != nil && r.fetched.IsZero() {
			return nil, err
		}
	}
	k, err := pick(r.set, kid)
	if err != nil && time.Since(r.fetched) > minRefresh {
		if ferr := r.fetch(ctx); ferr != nil {
			return nil, ferr
		}
		k, err = pick(r.set, kid)
	}
	return k, err
}

func (r *RemoteKeySet) fetch(ctx context.Context) error {
	c := r.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("fetching JWKS %s: %w", r.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching JWKS %s: HTTP %d", r.URL, resp.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return fmt.Errorf("JWKS %s: %w", r.URL, err)
	}
	r.set, r.fetched = set, time.Now()
	return nil
}
