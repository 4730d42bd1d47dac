// Command natsd runs a NATS server with JetStream as its own process, for the chaos and soak
// harnesses: they kill it with SIGKILL and start it again on the same store directory, which
// must keep every acknowledged message. It is natsx.StartEmbedded behind flags; with -cluster
// and -routes it is one node of a JetStream cluster (the harnesses run three, with R3 streams),
// and with -users only the given users may connect, each with its permissions (the harnesses
// write the policy's users: services/worldgate/policy).
//
//	go run ./scripts/natsd -port 4222 -store /tmp/nats
//	go run ./scripts/natsd -name n1 -port 4222 -cluster 127.0.0.1:6222 \
//	    -routes nats-route://127.0.0.1:6223,nats-route://127.0.0.1:6224 -store /tmp/n1 -users users.json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("natsd", flag.ExitOnError)
	host := fs.String("host", "127.0.0.1", "listen host")
	port := fs.Int("port", 4222, "client port")
	store := fs.String("store", "", "JetStream store directory (required; a restart on it keeps the streams)")
	name := fs.String("name", "", "server name (required in a cluster: each node its own)")
	cluster := fs.String("cluster", "", "host:port the cluster routes listen on (empty: a single server)")
	clusterName := fs.String("cluster-name", "worldgate", "cluster name")
	routes := fs.String("routes", "", "comma-separated routes to the other nodes (nats-route://host:port)")
	monitor := fs.Int("http", 0, "monitoring port (/healthz, /jsz); 0: none")
	prof := fs.Int("prof", 0, "port of the NATS server's Go profiles (/debug/pprof/), for diagnosis; 0: none")
	usersFile := fs.String("users", "", "JSON file of users ([]natsx.User: Name, Password, Permissions); empty: no authentication")
	level := fs.String("log-level", "warn", "debug, info, warn or error")
	_ = fs.Parse(args)
	if *store == "" {
		return fmt.Errorf("-store is required")
	}
	cfg := natsx.EmbeddedConfig{Host: *host, Port: *port, StoreDir: *store, Logger: logx.New(os.Stderr, "natsd", *level)}
	if *usersFile != "" {
		b, err := os.ReadFile(*usersFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &cfg.Users); err != nil {
			return fmt.Errorf("%s: %w", *usersFile, err)
		}
	}
	var clusterHost string
	var clusterPort int
	if *cluster != "" {
		h, p, err := net.SplitHostPort(*cluster)
		if err != nil {
			return fmt.Errorf("-cluster: %w", err)
		}
		if clusterPort, err = strconv.Atoi(p); err != nil {
			return fmt.Errorf("-cluster: %w", err)
		}
		clusterHost = h
		if *name == "" {
			return fmt.Errorf("-name is required with -cluster")
		}
	}
	cfg.Configure = func(o *server.Options) {
		if *name != "" {
			o.ServerName = *name
		}
		if *monitor != 0 {
			o.HTTPHost, o.HTTPPort = *host, *monitor
		}
		if *prof != 0 {
			o.ProfPort = *prof
		}
		if *cluster != "" {
			o.Cluster.Name, o.Cluster.Host, o.Cluster.Port = *clusterName, clusterHost, clusterPort
			o.Routes = server.RoutesFromStr(*routes)
		}
	}
	srv, err := natsx.StartEmbedded(cfg)
	if err != nil {
		return err
	}
	fmt.Println("natsd listening on", srv.ClientURL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	srv.Shutdown()
	return nil
}
