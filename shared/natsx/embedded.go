// Package natsx holds Worldgate's NATS plumbing: an embedded JetStream server for `worldgate dev`
// and tests, connecting, and the one routine that provisions the JetStream topology.
package natsx

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig configures an in-process NATS server with JetStream.
type EmbeddedConfig struct {
	Host     string // default 127.0.0.1
	Port     int    // 0 picks a free port
	StoreDir string // JetStream data; required, so that a restart keeps every acknowledged message
	// SyncAlways makes JetStream fsync every write before acknowledging it. Off (the NATS
	// default), a process crash loses nothing but an OS crash or power loss can lose writes
	// acknowledged within the last sync interval (2 minutes). On, publishing is much slower.
	SyncAlways bool
	// Users, when set, are the only ones who may connect, each with its permissions
	// (shared/natsx/natsauth computes Worldgate's). None: no authentication.
	Users []User
	// MaxStore is how many bytes JetStream may reserve for streams and buckets in StoreDir. 0:
	// server.JetStreamMaxStoreDefault (1 TB), not NATS's default of three quarters of the disk
	// free at start. JetStream reserves every stream's MaxBytes when it creates it, and the
	// default topology's add up to 7.4 GiB (DefaultTopology(...).StoreBytes()), while
	// development, tests and the scripts write little of that: on a machine with less than about
	// 10 GiB free they could not even provision, and a stream without a size limit (bench's
	// ceiling) finds no room once the topology's limits fill the reservation. A warning says when
	// the disk is smaller than the topology's limits; a full disk then fails writes.
	MaxStore int64
	// Configure adjusts the server options last (tests).
	Configure func(*server.Options)
	Logger    *slog.Logger
}

// ServerMaxPayload is the largest message the embedded server (and the deployed servers, see
// deploy/nats) accepts; every stream's MaxMsgSize stays below it (CheckLimits).
const ServerMaxPayload = 8 << 20

// Embedded is a running in-process NATS server.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts a NATS server with JetStream in this process and waits until it accepts
// connections.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded NATS needs a store directory for JetStream data")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	port := cfg.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "worldgate-embedded",
		Host:       cfg.Host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		SyncAlways: cfg.SyncAlways,
		MaxPayload: ServerMaxPayload,
	}
	opts.JetStreamMaxStore = cmp.Or(cfg.MaxStore, server.JetStreamMaxStoreDefault)
	if need, free := DefaultTopology(TopologyOptions{}).StoreBytes(), freeDisk(cfg.StoreDir); cfg.MaxStore == 0 && free >= 0 && free < need {
		if cfg.Logger != nil {
			cfg.Logger.Warn("the disk has less free space than the JetStream topology may hold: it is provisioned anyway, and writes fail once the disk is full",
				"store_dir", cfg.StoreDir, "three_quarters_of_free", gib(free), "topology_holds_at_most", gib(need))
		}
	}
	for _, u := range cfg.Users {
		if !validUserName(u.Name) || u.Password == "" {
			return nil, fmt.Errorf("embedded NATS: user %q needs a name without spaces, dots or wildcards, and a password", u.Name)
		}
	}
	if len(cfg.Users) > 0 {
		opts.Users = serverUsers(cfg.Users)
	}
	if cfg.Configure != nil {
		cfg.Configure(opts)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	if cfg.Logger != nil {
		srv.SetLoggerV2(&slogAdapter{cfg.Logger.With("component", "nats-server")}, false, false, false)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("embedded NATS did not become ready within 10s")
	}
	return &Embedded{srv: srv}, nil
}

// ClientURL is the nats:// URL clients connect to.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Server is the underlying server, for tests that need to inspect it.
func (e *Embedded) Server() *server.Server { return e.srv }

// Shutdown stops the server and waits until it has stopped. JetStream flushes its files.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

type slogAdapter struct{ l *slog.Logger }

func (a *slogAdapter) Noticef(f string, v ...any) { a.l.Info(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Warnf(f string, v ...any)   { a.l.Warn(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Fatalf(f string, v ...any)  { a.l.Error(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Errorf(f string, v ...any)  { a.l.Error(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Debugf(f string, v ...any)  { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Tracef(f string, v ...any)  { a.l.Debug(fmt.Sprintf(f, v...)) }
