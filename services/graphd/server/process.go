package server

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/gctune"
)

// EnvPrefix is the prefix of graphd's environment variables: -listen is WORLDGATE_GRAPHD_LISTEN.
const EnvPrefix = "WORLDGATE_GRAPHD_"

// ServiceConfig is the graphd program's configuration, in the shape of the other services'
// (services/internal/service, which graphd does not import: it would link NATS into the graph
// server): the flags it registers, each with a WORLDGATE_GRAPHD_* variable, and the argv and
// environment a process of it needs (Args, Env).
type ServiceConfig struct {
	Listen  string
	DataDir string
	// Users are name:password[:ro] entries, comma separated; empty disables authentication.
	Users            string
	BatchSize        int
	MaxFrameBytes    int64
	TraversalTimeout time.Duration
	MaxResults       int
	LogLevel         string
	// Sources are the traversal sources served besides g, comma separated.
	Sources        string
	SessionTimeout time.Duration
	IODir          string
	Pprof          bool
}

// DefaultServiceConfig is the configuration of a graphd started with no flags.
func DefaultServiceConfig() ServiceConfig {
	var c ServiceConfig
	c.RegisterFlags(flag.NewFlagSet("defaults", flag.ContinueOnError))
	return c
}

// RegisterFlags registers graphd's flags on fs, each with its default.
func (c *ServiceConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8182", "listen address (WORLDGATE_GRAPHD_LISTEN)")
	fs.StringVar(&c.DataDir, "data", "./graph", "data directory; empty for in-memory only (WORLDGATE_GRAPHD_DATA)")
	fs.StringVar(&c.Users, "users", "", "users as name:password[:ro],... ; empty disables authentication (WORLDGATE_GRAPHD_USERS)")
	fs.IntVar(&c.BatchSize, "batch-size", DefaultBatchSize, "results per response frame (WORLDGATE_GRAPHD_BATCH_SIZE)")
	fs.Int64Var(&c.MaxFrameBytes, "max-frame-bytes", int64(DefaultMaxFrameBytes), "largest accepted request frame (WORLDGATE_GRAPHD_MAX_FRAME_BYTES)")
	fs.DurationVar(&c.TraversalTimeout, "timeout", DefaultTraversalTimeout, "per-traversal time limit (WORLDGATE_GRAPHD_TIMEOUT)")
	fs.IntVar(&c.MaxResults, "max-results", DefaultMaxResults, "per-traversal result limit (WORLDGATE_GRAPHD_MAX_RESULTS)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error (WORLDGATE_GRAPHD_LOG_LEVEL)")
	fs.StringVar(&c.Sources, "sources", "", "traversal sources served besides g, comma separated (gmodern,gcrew); each its own graph, in <data>/sources/<name> (WORLDGATE_GRAPHD_SOURCES)")
	fs.DurationVar(&c.SessionTimeout, "session-timeout", DefaultSessionTimeout, "how long an idle session keeps its open transaction (WORLDGATE_GRAPHD_SESSION_TIMEOUT)")
	fs.BoolVar(&c.Pprof, "pprof", false, "also serve Go's runtime profiles at /debug/pprof/ on the listen address, for diagnosis; never on an address clients other than the operator's reach (WORLDGATE_GRAPHD_PPROF)")
	fs.StringVar(&c.IODir, "io-dir", "", "directory g.io(path).read() reads GraphSON/GraphML files from, paths resolved inside it only; empty refuses io() (WORLDGATE_GRAPHD_IO_DIR)")
}

// Args renders c as a graphd process's argv: -name=value for each flag whose value differs
// from its default.
func (c *ServiceConfig) Args() []string {
	var args []string
	c.visit(func(name, value string) { args = append(args, "-"+name+"="+value) })
	return args
}

// Env renders c as a graphd process's environment: WORLDGATE_GRAPHD_NAME=value for each flag
// whose value differs from its default (for what should not show in argv, such as passwords).
func (c *ServiceConfig) Env() []string {
	var env []string
	c.visit(func(name, value string) { env = append(env, config.EnvName(EnvPrefix, name)+"="+value) })
	return env
}

func (c *ServiceConfig) visit(f func(name, value string)) {
	var cur ServiceConfig
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	cur.RegisterFlags(fs)
	cur = *c // the flags point into cur: they read c's values now
	fs.VisitAll(func(fl *flag.Flag) {
		if v := fl.Value.String(); v != fl.DefValue {
			f(fl.Name, v)
		}
	})
}

// Check reports a configuration graphd cannot start with: a bad log level or users list
// (source names are checked by New).
func (c *ServiceConfig) Check() error {
	if _, err := c.level(); err != nil {
		return fmt.Errorf("bad -log-level: %w", err)
	}
	if _, err := parseUsers(c.Users); err != nil {
		return fmt.Errorf("bad -users: %w", err)
	}
	return nil
}

func (c *ServiceConfig) level() (slog.Level, error) {
	var lvl slog.Level
	err := lvl.UnmarshalText([]byte(c.LogLevel))
	return lvl, err
}

// Config is the server configuration c gives, logging to log.
func (c *ServiceConfig) Config(log *slog.Logger) (Config, error) {
	us, err := parseUsers(c.Users)
	if err != nil {
		return Config{}, fmt.Errorf("bad -users: %w", err)
	}
	return Config{
		Listen: c.Listen, DataDir: c.DataDir, Users: us, BatchSize: c.BatchSize, MaxFrameBytes: c.MaxFrameBytes,
		TraversalTimeout: c.TraversalTimeout, MaxResults: c.MaxResults, Logger: log,
		Sources: parseSources(c.Sources), SessionTimeout: c.SessionTimeout, IODir: c.IODir, Pprof: c.Pprof,
	}, nil
}

// Serve is graphd's process: it logs JSON to logW at c's level, starts the server c
// configures, writes the readiness line "graphd listening on ws://…/gremlin" to ready, and
// serves until ctx ends, then shuts down gracefully (in-flight requests finished, a snapshot
// written) within 30 s.
func Serve(ctx context.Context, c ServiceConfig, ready, logW io.Writer) error {
	lvl, err := c.level()
	if err != nil {
		return fmt.Errorf("bad -log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(logW, &slog.HandlerOptions{Level: lvl}))
	gctune.Apply(gctune.Default, log)
	cfg, err := c.Config(log)
	if err != nil {
		return err
	}
	srv, err := New(cfg)
	if err != nil {
		return fmt.Errorf("startup failed: %w", err)
	}
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("startup failed: %w", err)
	}
	// Machine-readable readiness line (used by tests and tooling).
	fmt.Fprintln(ready, "graphd listening on", srv.URL())
	<-ctx.Done()
	log.Info("graphd: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Close(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// parseUsers reads the -users list: name:password[:ro], comma separated.
func parseUsers(s string) ([]User, error) {
	var out []User
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, ":")
		if len(f) < 2 || len(f) > 3 || f[0] == "" {
			return nil, fmt.Errorf("bad user %q (want name:password[:ro])", part)
		}
		u := User{Name: f[0], Password: f[1]}
		if len(f) == 3 {
			if f[2] != "ro" && f[2] != "rw" {
				return nil, fmt.Errorf("bad user mode %q (want ro or rw)", f[2])
			}
			u.ReadOnly = f[2] == "ro"
		}
		out = append(out, u)
	}
	return out, nil
}

// parseSources splits the -sources list (names are checked by New).
func parseSources(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
