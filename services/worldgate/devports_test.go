package main

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A busy port stops `worldgate dev` at once with the port, what needed it and the flag that
// chooses another (issue 40 item 5), for NATS and every other port dev binds; it used to wait
// 10 s and say only "embedded NATS did not become ready".
func TestDevSaysWhichPortIsBusy(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	for _, flag := range []string{"-nats-port", "-graph-port", "-admin-port", "-mcp-port", "-edge-port"} {
		args := []string{"-data-dir", t.TempDir(), "-no-demo", "-nats-port", "0", "-graph-port", "0", "-admin-port", "0", "-mcp-port", "0", "-edge-port", "0", flag, port}
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		began := time.Now()
		err := runDev(ctx, args, &out, &out)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "port "+port+" on 127.0.0.1") || !strings.Contains(err.Error(), "already in use") ||
			!strings.Contains(err.Error(), "choose another port with "+flag) {
			t.Fatalf("%s %s taken: %v\n%s", flag, port, err, out.String())
		}
		if d := time.Since(began); d > 3*time.Second {
			t.Errorf("%s: told after %s", flag, d)
		}
	}
	// The same port for two servers is caught before either starts.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	same := strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	free.Close()
	err = runDev(context.Background(), []string{"-data-dir", t.TempDir(), "-no-demo", "-nats-port", "0", "-graph-port", "0", "-admin-port", "0",
		"-mcp-port", same, "-edge-port", same}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "port "+same+" is given to both -mcp-port and -edge-port") {
		t.Fatalf("one port for two servers: %v", err)
	}
}
