// Command healthcheck is the container health check of Worldgate's images. The images are
// distroless (no shell, no curl), so each carries this small static binary, and the image's
// HEALTHCHECK runs it:
//
//	healthcheck                  GET http://127.0.0.1:<admin port>/readyz, the port taken from
//	                             $WORLDGATE_ADMIN or $WORLDGATE_MCP_ADMIN (what the service binds)
//	healthcheck -path /healthz   liveness instead of readiness
//	healthcheck -url URL         any URL
//	healthcheck -tcp HOST:PORT   a TCP connect (graphd, which has no admin port)
//
// It exits 0 when the check passes and 1 otherwise, with one line on stderr saying why: the
// contract of Docker's HEALTHCHECK. It reads nothing but its flags and those two variables.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.LookupEnv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

// adminEnv are the variables a service's admin address is read from, in order: the workers'
// -admin and the MCP servers' -admin.
var adminEnv = []string{"WORLDGATE_ADMIN", "WORLDGATE_MCP_ADMIN"}

func run(args []string, lookup func(string) (string, bool), stdout io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	url := fs.String("url", "", "URL to GET; empty: http://127.0.0.1:<port of $WORLDGATE_ADMIN or $WORLDGATE_MCP_ADMIN><path>")
	path := fs.String("path", "/readyz", "path on the admin port when -url is empty")
	tcp := fs.String("tcp", "", "HOST:PORT to connect to instead of an HTTP check")
	timeout := fs.Duration("timeout", 3*time.Second, "time limit of the whole check")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *tcp != "" {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", *tcp)
		if err != nil {
			return err
		}
		return c.Close()
	}
	if *url == "" {
		u, err := adminURL(lookup, *path)
		if err != nil {
			return err
		}
		*url = u
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", *url, resp.Status, body)
	}
	_, err = stdout.Write(body)
	return err
}

// adminURL is the URL of path on the local admin port. A service bound to a wildcard or an
// interface address is reached on the loopback address, since the check runs in the service's
// own network namespace.
func adminURL(lookup func(string) (string, bool), path string) (string, error) {
	for _, name := range adminEnv {
		addr, ok := lookup(name)
		if !ok || addr == "" {
			continue
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil || port == "" || port == "0" {
			return "", fmt.Errorf("%s=%q has no fixed port to check; set -url", name, addr)
		}
		return "http://" + net.JoinHostPort("127.0.0.1", port) + path, nil
	}
	return "", errors.New("no admin address: set $WORLDGATE_ADMIN or $WORLDGATE_MCP_ADMIN (the service's -admin), or -url")
}
