package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/worldgate/worldgate/shared/config"
)

// checkDevPorts tries each port dev is about to bind (those not 0) on f.host, all at once so a
// port given to two servers is caught too, and releases them: a busy port is reported at once
// with the flag that chooses another, instead of a server failing later to become ready.
func checkDevPorts(f devFlags) error {
	ports := []struct {
		flag, what string
		port       int
	}{
		{"-nats-port", "NATS", f.natsPort},
		{"-graph-port", "graphd (Gremlin)", f.graphPort},
		{"-admin-port", "the admin server (/metrics, /readyz)", f.adminPort},
		{"-mcp-port", "the MCP servers", f.mcpPort},
		{"-edge-port", "edge (HTTP API and /play)", f.edgePort},
	}
	taken := map[int]string{}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, p := range ports {
		if p.port == 0 {
			continue
		}
		if other, dup := taken[p.port]; dup {
			return fmt.Errorf("port %d is given to both %s and %s: choose another with %s N (0 picks a free one)", p.port, other, p.flag, p.flag)
		}
		taken[p.port] = p.flag
		addr := net.JoinHostPort(f.host, strconv.Itoa(p.port))
		l, err := net.Listen("tcp", addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("port %d on %s, for %s, is already in use (another worldgate dev, or another program): stop it, or choose another port with %s N (0 picks a free one; or %s)",
				p.port, f.host, p.what, p.flag, config.EnvName(config.Prefix, p.flag[1:]))
		}
		if err != nil {
			return fmt.Errorf("cannot listen on %s for %s (%s): %w", addr, p.what, p.flag, err)
		}
		held = append(held, l)
	}
	return nil
}
