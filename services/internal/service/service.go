// Package service is the one shape every Worldgate service is built in: a Config that
// registers its flags (and renders the argv and environment a process of it needs, Args and
// Env), and Start(ctx, Infra, Config), which registers the service's handlers on the
// infrastructure it is given and returns what runs it. A program's main hands both to Main,
// which builds the infrastructure from the process flags (NATS, graph, admin address, log level,
// provisioning, tracing); the in-process stack (services/worldgate/stack) gives it its own.
// So a service is wired once, and a flag is added once.
package service

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/shared/admin"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/gctune"
	"github.com/worldgate/worldgate/shared/graphx"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/mcpx/client"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/tracing"
)

// Infra is what a service runs on: the connections its process opened from its flags (Main),
// or the in-process stack's.
type Infra struct {
	Conn      *nats.Conn
	JetStream jetstream.JetStream
	// Graph is the graph connection, for a service whose Program reads one (nil otherwise).
	Graph *graphx.Conn
	// MCP, if set, connects to the named MCP servers (the stack's, in process); nil: the
	// service dials the URLs its flags give.
	MCP        func(ctx context.Context, servers ...string) (*client.Client, error)
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Admin takes the service's readiness checks and details. In a process of its own the
	// checks are "handlers" (the runtime app) and the service's own; the stack, which serves
	// several services on one admin port, names "handlers" after the service.
	Admin Admin
}

// Admin is where a service's readiness checks and /readyz details go (admin.Server).
type Admin interface {
	AddCheck(name string, c admin.Check)
	AddDetail(name string, d admin.Detail)
}

// Run runs a started service until ctx ends.
type Run func(ctx context.Context) error

// Program describes a service's process: its name, and the defaults of its process flags.
type Program struct {
	Name string
	// NATSUser is its NATS user in deploy/nats, for -nats-user's help.
	NATSUser string
	// Admin is the default admin address.
	Admin string
	// Graph, if set, gives the program the -graph-* flags with these defaults.
	Graph *graphx.Settings
	// Lag are the streams whose consumer lag the process exports.
	Lag []string
	// EnvPrefix is the prefix of the flags' environment variables (default config.Prefix).
	EnvPrefix string
	// GC is the program's GOGC percent when the environment sets none (gctune; 0: Default).
	GC int
	// NoProvisioning and NoTracing leave out -provision (and the topology's flags) and the
	// -otlp-* flags, for a program that neither provisions nor traces (edge).
	NoProvisioning, NoTracing bool
}

// Process is what every program reads besides its service's own settings.
type Process struct {
	NATS         natsx.ConnConfig
	Graph        graphx.Settings
	Admin        string
	Pprof        bool
	LogLevel     string
	Provisioning natsx.Provisioning
	Tracing      tracing.Config
}

// RegisterFlags registers the process flags of p on fs, with the program's defaults.
func (prog Program) RegisterFlags(fs *flag.FlagSet, p *Process) {
	p.NATS = natsx.ConnConfig{}
	p.NATS.RegisterFlags(fs, prog.NATSUser, false)
	if prog.Graph != nil {
		p.Graph = *prog.Graph
		p.Graph.RegisterFlags(fs, "graph-")
	}
	fs.StringVar(&p.Admin, "admin", prog.Admin, "admin address for /metrics, /healthz, /readyz")
	fs.BoolVar(&p.Pprof, "pprof", false, "also serve Go's runtime profiles on the admin address (/debug/pprof/: CPU, heap, goroutines, mutexes); for diagnosis, never on a public address")
	fs.StringVar(&p.LogLevel, "log-level", "info", "debug, info, warn or error")
	p.Provisioning = natsx.Provisioning{}
	if !prog.NoProvisioning {
		p.Provisioning.RegisterFlags(fs)
	}
	p.Tracing = tracing.Config{ServiceName: prog.Name}
	if !prog.NoTracing {
		p.Tracing.RegisterFlags(fs)
	}
}

// Config is a service's configuration as Main reads it.
type Config interface {
	// RegisterFlags registers every flag of the program on fs, each with its default.
	RegisterFlags(fs *flag.FlagSet)
	// Proc is the process part of the configuration.
	Proc() *Process
	// Check reports a configuration the service cannot start with, before anything connects.
	Check() error
}

// Main is a program's main: it parses the flags (and their environment variables) into cfg,
// opens the infrastructure the program needs, starts the service and runs it until SIGINT or
// SIGTERM. An error is printed as "<program>: <error>" and exits with status 1; -h prints the
// flags and their environment variables and exits with status 0.
func Main(prog Program, cfg Config, start func(ctx context.Context, in Infra) (Run, error)) {
	if err := run(prog, cfg, start); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog.Name, err)
		os.Exit(1)
	}
}

func run(prog Program, cfg Config, start func(ctx context.Context, in Infra) (Run, error)) error {
	fs := flag.NewFlagSet(prog.Name, flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := config.Parse(fs, os.Args[1:], prog.envPrefix()); err != nil {
		return err
	}
	if err := cfg.Check(); err != nil {
		return err
	}
	p := cfg.Proc()
	log := logx.New(os.Stderr, prog.Name, p.LogLevel)
	gctune.Apply(cmp.Or(prog.GC, gctune.Default), log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stopTracing, err := tracing.Setup(ctx, p.Tracing)
	if err != nil {
		return err
	}
	defer func() {
		if err := stopTracing(); err != nil {
			log.Warn("tracing: the last spans were not exported", "err", err)
		}
	}()

	p.NATS.Name = prog.Name
	conn, js, err := natsx.Connect(p.NATS, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := p.Provisioning.AtStart(ctx, js, log); err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	adm := admin.New(reg, log)
	if p.Pprof {
		adm.ServeProfiles()
	}
	in := Infra{Conn: conn, JetStream: js, Registerer: reg, Logger: log, Admin: adm}
	if prog.Graph != nil {
		if in.Graph, err = graphx.Open(p.Graph); err != nil {
			return err
		}
		defer in.Graph.Close()
	}
	runService, err := start(ctx, in)
	if err != nil {
		return err
	}
	if len(prog.Lag) > 0 {
		reg.MustRegister(natsx.NewLagCollector(js, log, prog.Lag...))
	}
	if err := adm.Start(p.Admin); err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = adm.Close(sctx)
	}()
	log.Info(prog.Name+" started", "admin", adm.Addr())
	return runService(ctx)
}

func (prog Program) envPrefix() string {
	if prog.EnvPrefix == "" {
		return config.Prefix
	}
	return prog.EnvPrefix
}

// Args renders cfg as the argv of a process of the service: one -name=value for each flag
// whose value differs from its default (def, as DefaultConfig returns it). register is the
// Config's RegisterFlags; it may reset the fields to their defaults, as registering does.
func Args[C any](def, cfg C, register func(*C, *flag.FlagSet)) []string {
	var args []string
	visit(def, cfg, register, func(name, value string) { args = append(args, "-"+name+"="+value) })
	return args
}

// Env renders cfg as the environment of a process of the program, NAME=value for each flag
// whose value differs from its default (config.EnvName): for what should not show in argv,
// such as passwords.
func Env[C any](prog Program, def, cfg C, register func(*C, *flag.FlagSet)) []string {
	var env []string
	visit(def, cfg, register, func(name, value string) { env = append(env, config.EnvName(prog.envPrefix(), name)+"="+value) })
	return env
}

func visit[C any](def, cfg C, register func(*C, *flag.FlagSet), f func(name, value string)) {
	d, c := def, def
	fd, fc := flag.NewFlagSet("defaults", flag.ContinueOnError), flag.NewFlagSet("config", flag.ContinueOnError)
	register(&d, fd)
	register(&c, fc)
	c = cfg // the flags of fc point into c: they read cfg's values now
	fc.VisitAll(func(fl *flag.Flag) {
		if v := fl.Value.String(); v != fd.Lookup(fl.Name).DefValue {
			f(fl.Name, v)
		}
	})
}

// Defaults is the configuration register gives: every flag at its default.
func Defaults[C any](register func(*C, *flag.FlagSet)) C {
	var c C
	register(&c, flag.NewFlagSet("defaults", flag.ContinueOnError))
	return c
}
