// Command graphd runs Worldgate's embedded Gremlin-Server-compatible graph
// database standalone:
//
//	graphd --listen 127.0.0.1:8182 --data ./graph
//
// Every flag has a WORLDGATE_GRAPHD_* environment equivalent (the flag wins);
// the flags are server.ServiceConfig's. Users are given as name:password[:ro]
// entries, comma separated.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/shared/config"
)

func main() {
	cfg := server.DefaultServiceConfig()
	fs := flag.NewFlagSet("graphd", flag.ExitOnError)
	cfg.RegisterFlags(fs)
	if err := config.Parse(fs, os.Args[1:], server.EnvPrefix); err != nil {
		exit(2, err)
	}
	if err := cfg.Check(); err != nil {
		exit(2, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := server.Serve(ctx, cfg, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		exit(1, err)
	}
}

func exit(code int, err error) {
	fmt.Fprintln(os.Stderr, "graphd:", err)
	os.Exit(code)
}
