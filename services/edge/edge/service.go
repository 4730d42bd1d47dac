package edge

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/worldgate/worldgate/services/internal/service"
)

// Program is edge's process, on NATS as edge. It neither provisions nor traces.
var Program = service.Program{Name: Name, NATSUser: Name, Admin: "127.0.0.1:9430", NoProvisioning: true, NoTracing: true}

// ServiceConfig is edge's configuration: its flags (RegisterFlags), its process's argv (Args)
// and environment (Env). Keyring, Extra and Version are for an in-process caller (the stack's
// dev keys and /play console); a process reads KeysFile.
type ServiceConfig struct {
	service.Process
	Listen, KeysFile, CORSOrigins string
	SSEBuffer, MaxBatch           int
	Drain                         time.Duration

	Keyring *Keyring                // nil: the keys of KeysFile
	Extra   map[string]http.Handler // routes beside the API (Config.Extra)
	Version string                  // reported to NATS service discovery (default 1.0.0)
}

// DefaultServiceConfig is the configuration with every flag at its default.
func DefaultServiceConfig() ServiceConfig {
	return service.Defaults((*ServiceConfig).RegisterFlags)
}

// RegisterFlags registers edge's flags on fs, each with its default.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	Program.RegisterFlags(fs, &c.Process)
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address of the HTTP API")
	fs.StringVar(&c.KeysFile, "keys-file", "", `JSON API keys: {"keys":[{"name":…,"sha256":…,"scopes":["publish","read:all"],"rate":20}]} (required)`)
	fs.StringVar(&c.CORSOrigins, "cors-origins", "", "comma-separated browser origins allowed to call the API, each named (e.g. https://game.example; * is refused: answers are authenticated); empty: none")
	fs.IntVar(&c.SSEBuffer, "sse-buffer", 256, "outcomes that may wait for a slow SSE client before it is dropped (it resumes with Last-Event-ID)")
	fs.IntVar(&c.MaxBatch, "max-batch", 500, "most envelopes in one NDJSON request")
	fs.DurationVar(&c.Drain, "drain-timeout", 10*time.Second, "on SIGTERM, how long requests in flight may take to finish")
}

// Proc is the process part of the configuration (service.Config).
func (c *ServiceConfig) Proc() *service.Process { return &c.Process }

// Check reports a configuration edge cannot start with: no keys.
func (c *ServiceConfig) Check() error {
	if c.KeysFile == "" && c.Keyring == nil {
		return errors.New("-keys-file (WORLDGATE_KEYS_FILE) is required: edge serves only known API keys")
	}
	return nil
}

// Args is the argv of an edge process with this configuration.
func (c ServiceConfig) Args() []string {
	return service.Args(DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Env is the same configuration as environment variables.
func (c ServiceConfig) Env() []string {
	return service.Env(Program, DefaultServiceConfig(), c, (*ServiceConfig).RegisterFlags)
}

// Service is a started edge: listening at URL, serving once Run runs.
type Service struct {
	URL string
	Run service.Run
}

// Start builds edge on in, listens on c.Listen and registers with NATS service discovery; Run
// serves until its context ends, then drains for c.Drain.
func Start(_ context.Context, in service.Infra, c ServiceConfig) (*Service, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	ring, nkeys := c.Keyring, 0
	if ring == nil {
		keys, err := LoadKeys(c.KeysFile)
		if err != nil {
			return nil, err
		}
		if ring, err = NewKeyring(keys); err != nil {
			return nil, err
		}
		nkeys = len(keys)
	}
	var allowed []string
	for _, o := range strings.Split(c.CORSOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowed = append(allowed, o)
		}
	}
	srv, err := New(Config{JetStream: in.JetStream, Keys: ring, CORSOrigins: allowed, SSEBuffer: c.SSEBuffer, MaxBatch: c.MaxBatch,
		Logger: in.Logger, Registerer: in.Registerer, Extra: c.Extra})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, err
	}
	url := "http://" + ln.Addr().String()
	svc, err := Register(in.Conn, cmp.Or(c.Version, "1.0.0"), url)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("register with NATS service discovery: %w", err)
	}
	conn := in.Conn
	in.Admin.AddCheck("nats", func(context.Context) error {
		if !conn.IsConnected() {
			return errors.New("not connected to NATS")
		}
		return nil
	})
	in.Logger.Info("edge listening", "listen", ln.Addr().String(), "keys", nkeys)
	return &Service{URL: url, Run: func(ctx context.Context) error {
		defer func() { _ = svc.Stop() }()
		return srv.Serve(ctx, ln, c.Drain)
	}}, nil
}
