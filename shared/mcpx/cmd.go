package mcpx

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
)

// CommonFlags are the flags every MCP server binary shares. Parse them with
// shared/config.Parse and EnvPrefix, which gives each a WORLDGATE_MCP_*
// environment equivalent (the flag wins).
type CommonFlags struct {
	Listen     string
	Transport  string // http | stdio
	Admin      string
	TokenFile  string
	JWTSecret  string
	NoAuth     bool // HTTP without tokens; local development only
	RatePerSec float64
	Burst      int
	LogLevel   string
	// AllowedOrigins is the comma-separated Origin allow-list.
	AllowedOrigins string
	// Issuer, JWKSURL and Resource validate access tokens from an
	// authorization server; AuthServers are advertised in the metadata.
	Issuer      string
	JWKSURL     string
	Resource    string
	AuthServers string
}

// Register defines the common flags on fs.
func (c *CommonFlags) Register(fs *flag.FlagSet, defaultListen, defaultAdmin string) {
	fs.StringVar(&c.Listen, "listen", defaultListen, "Streamable HTTP listen address")
	fs.StringVar(&c.Transport, "transport", "http", "transport: http or stdio; stdio is trusted local use without tokens")
	fs.StringVar(&c.Admin, "admin", defaultAdmin, "admin listen address for /metrics /healthz /readyz; empty disables")
	fs.StringVar(&c.TokenFile, "token-file", "", "JSON file of static bearer tokens")
	fs.StringVar(&c.JWTSecret, "jwt-secret", "", "static HS256 key for bearer JWTs (development; at least 32 bytes); production tokens come from -issuer")
	fs.StringVar(&c.Issuer, "issuer", "", "authorization server (issuer URL) whose access tokens are accepted: iss must equal it; keys from -jwks-url")
	fs.StringVar(&c.JWKSURL, "jwks-url", "", "JWKS URL of -issuer (default: the jwks_uri of its /.well-known/oauth-authorization-server metadata)")
	fs.StringVar(&c.Resource, "resource", "", "this server's canonical URL, e.g. https://mcp-world.example.com/mcp: the audience its tokens must name and the resource of its /.well-known/oauth-protected-resource metadata (required with -issuer)")
	fs.StringVar(&c.AuthServers, "authorization-servers", "", "comma-separated authorization servers advertised in the protected-resource metadata (default: -issuer)")
	fs.BoolVar(&c.NoAuth, "no-auth", false, "serve HTTP without authentication (development only)")
	fs.Float64Var(&c.RatePerSec, "rate", 50, "tool calls per second per token (0 = unlimited)")
	fs.IntVar(&c.Burst, "burst", 100, "rate-limit burst per token")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug|info|warn|error")
	fs.StringVar(&c.AllowedOrigins, "allowed-origins", strings.Join(DefaultAllowedOrigins, ","),
		"comma-separated browser origins allowed to call (scheme://host[:port], :* for any port, * for all); requests with another Origin get 403, requests without one are served")
}

// ServerOptions builds the options every server takes from the flags:
// authentication, origins and the rate limit.
func (c *CommonFlags) ServerOptions(logger *slog.Logger, reg prometheus.Registerer) (Options, error) {
	auth, err := c.AuthConfig()
	if err != nil {
		return Options{}, err
	}
	origins, err := c.Origins()
	if err != nil {
		return Options{}, err
	}
	return Options{Logger: logger, Registerer: reg, Auth: auth, RateLimit: c.RateLimit(), Origins: origins}, nil
}

// Origins parses -allowed-origins.
func (c *CommonFlags) Origins() (*OriginPolicy, error) {
	return NewOriginPolicy(strings.Split(c.AllowedOrigins, ","))
}

// Logger returns a JSON slog logger writing to w at the configured level.
func (c *CommonFlags) Logger(w io.Writer, service string) *slog.Logger {
	return logx.New(w, service, c.LogLevel)
}

// AuthConfig builds the authentication configuration from the flags.
func (c *CommonFlags) AuthConfig() (AuthConfig, error) {
	var a AuthConfig
	if c.NoAuth || c.Transport == "stdio" {
		a.Disabled = true
		return a, nil
	}
	if c.TokenFile != "" {
		toks, err := LoadTokenFile(c.TokenFile)
		if err != nil {
			return a, err
		}
		a.StaticTokens = toks
	}
	if c.JWTSecret != "" {
		if len(c.JWTSecret) < 32 {
			return a, errors.New("-jwt-secret must be at least 32 bytes")
		}
		a.JWTSecret = []byte(c.JWTSecret)
	}
	a.Resource = c.Resource
	for _, s := range strings.Split(c.AuthServers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			a.AuthorizationServers = append(a.AuthorizationServers, s)
		}
	}
	if c.Issuer != "" {
		if c.Resource == "" {
			return a, errors.New("-issuer needs -resource: the URL clients reach this server at, which its tokens must name as audience")
		}
		a.Issuer = strings.TrimSuffix(c.Issuer, "/")
		jwks := c.JWKSURL
		if jwks == "" {
			meta, err := auth.GetAuthServerMetadata(context.Background(), a.Issuer, &http.Client{Timeout: 10 * time.Second})
			if err != nil || meta == nil || meta.JWKSURI == "" {
				return a, fmt.Errorf("-issuer %s: no jwks_uri in its metadata (%v); set -jwks-url", a.Issuer, err)
			}
			jwks = meta.JWKSURI
		}
		a.JWKS = &RemoteKeySet{URL: jwks}
	}
	if len(a.StaticTokens) == 0 && len(a.JWTSecret) == 0 && a.JWKS == nil {
		return a, errors.New("no credentials configured: set -issuer (with -resource), -token-file or -jwt-secret (or -no-auth for local development)")
	}
	return a, nil
}

// RateLimit returns the configured per-token limit.
func (c *CommonFlags) RateLimit() RateLimit {
	return RateLimit{PerSecond: c.RatePerSec, Burst: c.Burst}
}

// RunOptions drive Run.
type RunOptions struct {
	Flags   *CommonFlags
	Service string
	Logger  *slog.Logger
	// Server is the MCP server (for stdio); Handler serves it over HTTP.
	Server   *mcp.Server
	Handler  http.Handler
	Gatherer prometheus.Gatherer
	Ready    Readiness
	// OnListen, if set, is told the bound MCP address.
	OnListen func(net.Addr)
	// NATS, if set, registers the server with NATS service discovery as worldgate-<Service>
	// (`worldgate status` lists it with its health, from Ready) for as long as it serves.
	NATS    *nats.Conn
	Version string
}

// Register registers the MCP server service with NATS service discovery on nc: its status
// (and so `worldgate status`) reports the transport and its health, from ready (nil: healthy
// while it serves).
func Register(nc *nats.Conn, service, version, transport string, ready Readiness) (micro.Service, error) {
	return natsx.Register(nc, natsx.Service{Name: service, Version: version,
		Description: "MCP server " + service, Metadata: map[string]string{"transport": transport},
		Status: func() map[string]any {
			var err error
			if ready != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				err = ready(ctx)
				cancel()
			}
			return map[string]any{"service": service, "transport": transport, "health": natsx.Health(err)}
		}})
}

// Run serves until ctx is done (SIGTERM/SIGINT in main), then shuts down.
func Run(ctx context.Context, o RunOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.NATS != nil {
		transport := strings.ToLower(o.Flags.Transport)
		if transport == "" {
			transport = "http"
		}
		svc, err := Register(o.NATS, o.Service, o.Version, transport, o.Ready)
		if err != nil {
			return fmt.Errorf("register %s with NATS service discovery: %w", o.Service, err)
		}
		defer func() { _ = svc.Stop() }()
	}
	errc := make(chan error, 2)
	running := 0
	if o.Flags.Admin != "" && o.Gatherer != nil {
		running++
		go func() {
			err := ServeHTTP(ctx, o.Flags.Admin, AdminMux(o.Gatherer, o.Ready), 2*time.Second, func(a net.Addr) {
				o.Logger.Info("admin listening", "addr", a.String())
			})
			if err != nil {
				err = fmt.Errorf("admin server: %w", err)
			}
			errc <- err
		}()
	}
	running++
	switch strings.ToLower(o.Flags.Transport) {
	case "stdio":
		go func() {
			o.Logger.Info("serving MCP on stdio (trusted local use, no token)")
			errc <- ServeStdio(ctx, o.Server)
		}()
	case "http", "":
		go func() {
			errc <- ServeHTTP(ctx, o.Flags.Listen, o.Handler, 5*time.Second, func(a net.Addr) {
				o.Logger.Info("serving MCP over Streamable HTTP", "addr", a.String(), "path", "/mcp")
				if o.OnListen != nil {
					o.OnListen(a)
				}
			})
		}()
	default:
		return fmt.Errorf("unknown transport %q (want http or stdio)", o.Flags.Transport)
	}
	var first error
	for i := 0; i < running; i++ {
		err := <-errc
		if err != nil && first == nil {
			first = err
		}
		cancel() // one ending (stdio peer gone, listener error) ends all
	}
	o.Logger.Info("stopped")
	return first
}

// EnvPrefix is the environment prefix of the MCP servers' flags: -listen is
// WORLDGATE_MCP_LISTEN, -jwt-secret WORLDGATE_MCP_JWT_SECRET, and so on.
const EnvPrefix = "WORLDGATE_MCP_"

// IssueTokenCommand implements "<binary> issue-token": it prints an HS256 JWT
// signed with -jwt-secret / WORLDGATE_MCP_JWT_SECRET.
func IssueTokenCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("issue-token", flag.ContinueOnError)
	secret := fs.String("jwt-secret", "", "HS256 secret")
	subject := fs.String("subject", "", "who the token is for, e.g. ai-worker")
	scopes := fs.String("scopes", "world:read,lore:read,classify:read", "comma-separated scopes")
	ttl := fs.Duration("ttl", 24*time.Hour, "validity")
	players := fs.String("players", "", "comma-separated players the client may act for (a narrator's world events about them; mcp-propose)")
	if err := config.Parse(fs, args, EnvPrefix); err != nil {
		return err
	}
	tok, err := IssueToken([]byte(*secret), Token{Subject: *subject, Scopes: commaList(*scopes), Players: commaList(*players), TTL: *ttl})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}

// commaList splits a comma-separated flag value, dropping empty entries.
func commaList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
