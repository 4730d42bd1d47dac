// Package issuer is the small OAuth 2.0 authorization server `worldgate dev`
// runs so that the MCP authorization flow works offline: authorization
// server metadata (RFC 8414), a token endpoint for the client_credentials
// grant (RFC 6749 §4.4) with resource indicators (RFC 8707), and the JWKS
// its ES256 access tokens (RFC 9068 claims) are checked against. Signing is
// go-jose's. It is for development: in production the MCP servers point at
// a real identity provider (-issuer, -jwks-url; docs/configuration.md).
package issuer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/worldgate/worldgate/shared/mcpx"
)

// Paths served by Handler, relative to the issuer URL.
const (
	MetadataPath = "/.well-known/oauth-authorization-server"
	TokenPath    = "/oauth/token"
	JWKSPath     = "/oauth/jwks.json"
)

// Client is a registered confidential client, the scopes it may be granted and the players
// it may act for (every token it gets names them in the mcpx.ClaimPlayers claim: a narrator
// enqueues world events about these players only).
type Client struct {
	ID      string   `json:"clientId"`
	Secret  string   `json:"clientSecret"`
	Scopes  []string `json:"scopes"`
	Players []string `json:"players,omitempty"`
}

// Resource is a protected resource (an MCP endpoint's canonical URL) and the
// scope that grants access to it.
type Resource struct {
	URL   string
	Scope string
}

// Config configures an Issuer.
type Config struct {
	// URL is the issuer identifier and base URL (http://host:port).
	URL       string
	Clients   []Client
	Resources []Resource
	// TTL of access tokens (default 1 hour).
	TTL time.Duration
	// Key signs the tokens (ES256); nil: a new key (see LoadOrCreateKey).
	Key *ecdsa.PrivateKey
}

// Issuer mints and publishes.
type Issuer struct {
	cfg    Config
	signer jose.Signer
	public jose.JSONWebKey
}

// New returns an issuer.
func New(cfg Config) (*Issuer, error) {
	if cfg.URL == "" {
		return nil, errors.New("issuer URL is required")
	}
	cfg.URL = strings.TrimSuffix(cfg.URL, "/")
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
	}
	if cfg.Key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		cfg.Key = k
	}
	pub := jose.JSONWebKey{Key: &cfg.Key.PublicKey, Algorithm: string(jose.ES256), Use: "sig"}
	thumb, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, err
	}
	pub.KeyID = hex.EncodeToString(thumb[:8])
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: cfg.Key, KeyID: pub.KeyID}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		return nil, err
	}
	return &Issuer{cfg: cfg, signer: signer, public: pub}, nil
}

// URL is the issuer identifier.
func (i *Issuer) URL() string { return i.cfg.URL }

// JWKS is the public key set tokens are verified with.
func (i *Issuer) JWKS() jose.JSONWebKeySet {
	return jose.JSONWebKeySet{Keys: []jose.JSONWebKey{i.public}}
}

// Metadata is the RFC 8414 authorization server metadata.
func (i *Issuer) Metadata() *oauthex.AuthServerMeta {
	var scopes []string
	for _, r := range i.cfg.Resources {
		if !slices.Contains(scopes, r.Scope) {
			scopes = append(scopes, r.Scope)
		}
	}
	return &oauthex.AuthServerMeta{
		Issuer:                            i.cfg.URL,
		TokenEndpoint:                     i.cfg.URL + TokenPath,
		JWKSURI:                           i.cfg.URL + JWKSPath,
		GrantTypesSupported:               []string{"client_credentials"},
		ResponseTypesSupported:            []string{"token"},
		TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "client_secret_post"},
		ScopesSupported:                   scopes,
		// The go-sdk's client refuses metadata without PKCE methods, even
		// for client_credentials; there is no authorization endpoint here,
		// so no code is ever issued.
		CodeChallengeMethodsSupported: []string{"S256"},
	}
}

// Mint signs an access token for subject with scopes, valid for the
// audiences given (the resources' URLs).
func (i *Issuer) Mint(subject string, scopes, audience []string, ttl time.Duration) (string, error) {
	return i.MintGrant(Grant{Subject: subject, Scopes: scopes, Audience: audience, TTL: ttl})
}

// Grant is what an access token says.
type Grant struct {
	Subject string
	Scopes  []string
	// Players the client may act for (the mcpx.ClaimPlayers claim; none: the claim is left out).
	Players []string
	// Audience are the resources' URLs the token is for.
	Audience []string
	// TTL is its validity (zero: the issuer's).
	TTL time.Duration
}

// MintGrant signs an access token saying g.
func (i *Issuer) MintGrant(g Grant) (string, error) {
	ttl := g.TTL
	if ttl <= 0 {
		ttl = i.cfg.TTL
	}
	now := time.Now()
	var jti [12]byte
	_, _ = rand.Read(jti[:])
	std := jwt.Claims{Issuer: i.cfg.URL, Subject: g.Subject, Audience: g.Audience, IssuedAt: jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(ttl)), ID: hex.EncodeToString(jti[:])}
	extra := map[string]any{"scope": strings.Join(g.Scopes, " "), "client_id": g.Subject}
	if len(g.Players) > 0 {
		extra[mcpx.ClaimPlayers] = g.Players
	}
	return jwt.Signed(i.signer).Claims(std).Claims(extra).Serialize()
}

// Handler serves the metadata, token and JWKS endpoints.
func (i *Issuer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+MetadataPath, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, i.Metadata()) })
	mux.HandleFunc("GET "+JWKSPath, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, i.JWKS()) })
	mux.HandleFunc("POST "+TokenPath, i.token)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// oauthError writes an RFC 6749 §5.2 error.
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="worldgate-dev-issuer"`)
	}
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func (i *Issuer) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body is not a form: "+err.Error())
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	c := i.client(id, secret)
	if c == nil {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", fmt.Sprintf("grant_type %q: only client_credentials is supported", gt))
		return
	}
	scopes := strings.Fields(r.PostForm.Get("scope"))
	if len(scopes) == 0 {
		scopes = c.Scopes
	}
	for _, s := range scopes {
		if !slices.Contains(c.Scopes, s) {
			oauthError(w, http.StatusBadRequest, "invalid_scope", fmt.Sprintf("client %q may not be granted scope %q", c.ID, s))
			return
		}
	}
	// RFC 8707: the resources asked for become the audience; without one,
	// every resource the granted scopes open.
	var aud []string
	if asked := r.PostForm["resource"]; len(asked) > 0 {
		for _, a := range asked {
			res := i.resource(a)
			if res == nil {
				oauthError(w, http.StatusBadRequest, "invalid_target", fmt.Sprintf("unknown resource %q", a))
				return
			}
			if !slices.Contains(scopes, res.Scope) {
				oauthError(w, http.StatusBadRequest, "invalid_target", fmt.Sprintf("resource %q needs scope %q, not granted", a, res.Scope))
				return
			}
			aud = append(aud, res.URL)
		}
	} else {
		for _, res := range i.cfg.Resources {
			if slices.Contains(scopes, res.Scope) {
				aud = append(aud, res.URL)
			}
		}
	}
	if len(aud) == 0 {
		oauthError(w, http.StatusBadRequest, "invalid_scope", "the scopes open no resource")
		return
	}
	tok, err := i.MintGrant(Grant{Subject: c.ID, Scopes: scopes, Players: c.Players, Audience: aud, TTL: i.cfg.TTL})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "token_type": "Bearer", "expires_in": int(i.cfg.TTL.Seconds()), "scope": strings.Join(scopes, " "),
	})
}

func (i *Issuer) client(id, secret string) *Client {
	for k := range i.cfg.Clients {
		c := &i.cfg.Clients[k]
		if c.ID == id && subtle.ConstantTimeCompare([]byte(c.Secret), []byte(secret)) == 1 && secret != "" {
			return c
		}
	}
	return nil
}

func (i *Issuer) resource(u string) *Resource {
	u = strings.TrimSuffix(u, "/")
	for k := range i.cfg.Resources {
		if strings.TrimSuffix(i.cfg.Resources[k].URL, "/") == u {
			return &i.cfg.Resources[k]
		}
	}
	return nil
}

// LoadOrCreateKey reads the PEM-free JWK private key at path, creating an
// ES256 key there (mode 0600) on first use, so that tokens stay valid across
// restarts of `worldgate dev`.
func LoadOrCreateKey(path string) (*ecdsa.PrivateKey, error) {
	if b, err := os.ReadFile(path); err == nil {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(b); err != nil {
			return nil, fmt.Errorf("issuer key %s: %w", path, err)
		}
		if pk, ok := k.Key.(*ecdsa.PrivateKey); ok {
			return pk, nil
		}
		return nil, fmt.Errorf("issuer key %s is not an EC private key", path)
	}
	pk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	b, err := jose.JSONWebKey{Key: pk, Algorithm: string(jose.ES256), Use: "sig"}.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return pk, os.WriteFile(path, b, 0o600)
}

// NewSecret returns a random client secret.
func NewSecret() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
