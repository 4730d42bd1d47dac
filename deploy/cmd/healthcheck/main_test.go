package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// A server answering /readyz with 200 when ready and 503 otherwise, like shared/admin.
func adminServer(t *testing.T, ready *bool) (port string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			w.Write([]byte(`{"status":"ok"}`))
		case r.URL.Path == "/readyz" && *ready:
			w.Write([]byte(`{"status":"ready"}`))
		case r.URL.Path == "/readyz":
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":"not ready"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

func TestReadinessFromAdminEnv(t *testing.T) {
	ready := false
	port := adminServer(t, &ready)
	for _, name := range []string{"WORLDGATE_ADMIN", "WORLDGATE_MCP_ADMIN"} {
		lookup := env(map[string]string{name: "0.0.0.0:" + port})
		err := run(nil, lookup, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "503") {
			t.Fatalf("%s: not ready must fail with the status, got %v", name, err)
		}
		ready = true
		var out bytes.Buffer
		if err := run(nil, lookup, &out); err != nil || !strings.Contains(out.String(), "ready") {
			t.Fatalf("%s: ready: err=%v out=%q", name, err, out.String())
		}
		ready = false
		if err := run([]string{"-path", "/healthz"}, lookup, &bytes.Buffer{}); err != nil {
			t.Fatalf("%s: liveness while not ready must pass: %v", name, err)
		}
	}
}

func TestExplicitURLAndTCP(t *testing.T) {
	ready := true
	port := adminServer(t, &ready)
	if err := run([]string{"-url", "http://127.0.0.1:" + port + "/readyz"}, env(nil), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-url", "http://127.0.0.1:" + port + "/nowhere"}, env(nil), &bytes.Buffer{}); err == nil {
		t.Fatal("a 404 must fail")
	}
	if err := run([]string{"-tcp", "127.0.0.1:" + port}, env(nil), &bytes.Buffer{}); err != nil {
		t.Fatalf("tcp to a listening port: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if err := run([]string{"-tcp", closed, "-timeout", "1s"}, env(nil), &bytes.Buffer{}); err == nil {
		t.Fatal("tcp to a closed port must fail")
	}
}

func TestNoAdminAddress(t *testing.T) {
	for _, e := range []map[string]string{nil, {"WORLDGATE_ADMIN": ""}, {"WORLDGATE_ADMIN": "127.0.0.1:0"}, {"WORLDGATE_MCP_ADMIN": "nonsense"}} {
		if err := run(nil, env(e), &bytes.Buffer{}); err == nil {
			t.Fatalf("%v: want an error naming what to set", e)
		}
	}
}
