// Command graphd runs Worldgate's embedded Gremlin-Server-compatible graph
// database standalone:
//
//	graphd --listen 127.0.0.1:8182 --data ./graph
//
// Every flag has a WORLDGATE_GRAPHD_* environment equivalent (the flag wins).
// Users are given as name:password[:ro] entries, comma separated.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/gctune"
)

func parseUsers(s string) ([]server.User, error) {
	var out []server.User
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, ":")
		if len(f) < 2 || len(f) > 3 || f[0] == "" {
			return nil, fmt.Errorf("bad user %q (want name:password[:ro])", part)
		}
		u := server.User{Name: f[0], Password: f[1]}
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

// parseSources splits the -sources list (names are checked by server.New).
func parseSources(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func main() {
	fs := flag.NewFlagSet("graphd", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:8182", "listen address (WORLDGATE_GRAPHD_LISTEN)")
	data := fs.String("data", "./graph", "data directory; empty for in-memory only (WORLDGATE_GRAPHD_DATA)")
	users := fs.String("users", "", "users as name:password[:ro],... ; empty disables authentication (WORLDGATE_GRAPHD_USERS)")
	batch := fs.Int("batch-size", server.DefaultBatchSize, "results per response frame (WORLDGATE_GRAPHD_BATCH_SIZE)")
	maxFrame := fs.Int64("max-frame-bytes", int64(server.DefaultMaxFrameBytes), "largest accepted request frame (WORLDGATE_GRAPHD_MAX_FRAME_BYTES)")
	timeout := fs.Duration("timeout", server.DefaultTraversalTimeout, "per-traversal time limit (WORLDGATE_GRAPHD_TIMEOUT)")
	maxResults := fs.Int("max-results", server.DefaultMaxResults, "per-traversal result limit (WORLDGATE_GRAPHD_MAX_RESULTS)")
	level := fs.String("log-level", "info", "debug, info, warn or error (WORLDGATE_GRAPHD_LOG_LEVEL)")
	sources := fs.String("sources", "", "traversal sources served besides g, comma separated (gmodern,gcrew); each its own graph, in <data>/sources/<name> (WORLDGATE_GRAPHD_SOURCES)")
	sessionTimeout := fs.Duration("session-timeout", server.DefaultSessionTimeout, "how long an idle session keeps its open transaction (WORLDGATE_GRAPHD_SESSION_TIMEOUT)")
	ioDir := fs.String("io-dir", "", "directory g.io(path).read() reads GraphSON/GraphML files from, paths resolved inside it only; empty refuses io() (WORLDGATE_GRAPHD_IO_DIR)")
	if err := config.Parse(fs, os.Args[1:], "WORLDGATE_GRAPHD_"); err != nil {
		fmt.Fprintln(os.Stderr, "graphd:", err)
		os.Exit(2)
	}

	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintln(os.Stderr, "graphd: bad --log-level:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	gctune.Apply(gctune.Default, log)
	us, err := parseUsers(*users)
	if err != nil {
		log.Error("graphd: bad --users", "err", err)
		os.Exit(2)
	}
	srv, err := server.New(server.Config{
		Listen: *listen, DataDir: *data, Users: us, BatchSize: *batch, MaxFrameBytes: *maxFrame,
		TraversalTimeout: *timeout, MaxResults: *maxResults, Logger: log,
		Sources: parseSources(*sources), SessionTimeout: *sessionTimeout,
		IODir: *ioDir,
	})
	if err != nil {
		log.Error("graphd: startup failed", "err", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := srv.Start(ctx); err != nil {
		log.Error("graphd: startup failed", "err", err)
		os.Exit(1)
	}
	// Machine-readable readiness line on stdout (used by tests and tooling).
	fmt.Println("graphd listening on", srv.URL())
	<-ctx.Done()
	log.Info("graphd: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Close(sctx); err != nil {
		log.Error("graphd: shutdown", "err", err)
		os.Exit(1)
	}
}
