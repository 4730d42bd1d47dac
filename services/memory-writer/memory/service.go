package memory

import (
	"context"
	"flag"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/internal/service"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// Program is the memory-writer's process, on NATS as memory-writer.
var Program = service.Program{Name: Name, NATSUser: Name, Admin: "127.0.0.1:9106", Lag: []string{events.StreamCommitted}}

// Config is the memory-writer's configuration: its flags (RegisterFlags), its process's argv
// (Args) and environment (Env).
type Config struct {
	service.Process
	Limits Limits
}

// DefaultConfig is the configuration with every flag at its default.
func DefaultConfig() Config { return service.Defaults((*Config).RegisterFlags) }

// RegisterFlags registers the memory-writer's flags on fs, each with its default.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	Program.RegisterFlags(fs, &c.Process)
	fs.IntVar(&c.Limits.Exchanges, "exchanges", DefaultLimits.Exchanges, "exchanges kept per NPC–player pair")
	fs.IntVar(&c.Limits.Notes, "notes", DefaultLimits.Notes, "recent events kept per NPC")
}

// Proc is the process part of the configuration (service.Config).
func (c *Config) Proc() *service.Process { return &c.Process }

// Check reports a configuration the memory-writer cannot start with: none.
func (c *Config) Check() error { return nil }

// Args is the argv of a memory-writer process with this configuration.
func (c Config) Args() []string { return service.Args(DefaultConfig(), c, (*Config).RegisterFlags) }

// Env is the same configuration as environment variables.
func (c Config) Env() []string {
	return service.Env(Program, DefaultConfig(), c, (*Config).RegisterFlags)
}

// Start runs the memory-writer on in: it opens the memory bucket (waiting for it to be
// provisioned), registers the writer on COMMITTED and returns what runs it.
func Start(ctx context.Context, in service.Infra, c Config) (service.Run, error) {
	var store *Store
	if err := natsx.Await(ctx, "memory bucket", in.Logger, func(ctx context.Context) (err error) {
		store, err = Open(ctx, in.JetStream, c.Limits)
		return err
	}); err != nil {
		return nil, err
	}
	app, err := runtime.New(runtime.Options{Name: Name, Description: "keeps the interaction memory from committed events",
		Conn: in.Conn, JetStream: in.JetStream, Registerer: in.Registerer, Logger: in.Logger})
	if err != nil {
		return nil, err
	}
	if _, err := Register(app, store, in.Registerer, in.Logger); err != nil {
		return nil, err
	}
	in.Admin.AddCheck("handlers", app.Ready)
	return app.Run, nil
}
