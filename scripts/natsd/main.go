// Command natsd runs a NATS server with JetStream as its own process, for the chaos and soak
// harnesses: they kill it with SIGKILL and start it again on the same store directory, which
// must keep every acknowledged message. It is natsx.StartEmbedded behind flags.
//
//	go run ./scripts/natsd -port 4222 -store /tmp/nats
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

func main() {
	fs := flag.NewFlagSet("natsd", flag.ExitOnError)
	host := fs.String("host", "127.0.0.1", "listen host")
	port := fs.Int("port", 4222, "client port")
	store := fs.String("store", "", "JetStream store directory (required; a restart on it keeps the streams)")
	level := fs.String("log-level", "warn", "debug, info, warn or error")
	_ = fs.Parse(os.Args[1:])
	if *store == "" {
		fmt.Fprintln(os.Stderr, "natsd: -store is required")
		os.Exit(2)
	}
	srv, err := natsx.StartEmbedded(natsx.EmbeddedConfig{Host: *host, Port: *port, StoreDir: *store, Logger: logx.New(os.Stderr, "natsd", *level)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(1)
	}
	fmt.Println("natsd listening on", srv.ClientURL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	srv.Shutdown()
}
