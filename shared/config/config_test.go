package config

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParsePrecedence(t *testing.T) {
	env := map[string]string{
		"WORLDGATE_NATS_URL":   "nats://env:4222",
		"WORLDGATE_ADMIN_ADDR": "127.0.0.1:1",
		"WORLDGATE_TIMEOUT":    "5s",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	url := fs.String("nats-url", "nats://default:4222", "")
	admin := fs.String("admin-addr", ":9090", "")
	timeout := fs.Duration("timeout", time.Second, "")
	other := fs.String("other", "default", "")
	if err := parse(fs, []string{"-admin-addr", "127.0.0.1:2"}, "", lookup); err != nil {
		t.Fatal(err)
	}
	if *url != "nats://env:4222" || *admin != "127.0.0.1:2" || *timeout != 5*time.Second || *other != "default" {
		t.Fatalf("got url=%s admin=%s timeout=%s other=%s", *url, *admin, *timeout, *other)
	}
}

func TestParseBadEnvNamesVariable(t *testing.T) {
	lookup := func(k string) (string, bool) { return "soon", k == "WORLDGATE_X_TIMEOUT" }
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Duration("timeout", time.Second, "")
	err := parse(fs, nil, "WORLDGATE_X_", lookup)
	if err == nil || !strings.Contains(err.Error(), "WORLDGATE_X_TIMEOUT") {
		t.Fatalf("want an error naming the variable, got %v", err)
	}
}
