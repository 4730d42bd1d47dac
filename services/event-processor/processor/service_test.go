package processor

import (
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/natsx"
)

// A configuration rendered as argv (what the process harness starts a replica with) or as
// environment parses back into the same configuration, and the defaults render as nothing.
func TestConfigRendersTheArgvAndEnvironmentItParses(t *testing.T) {
	if args := DefaultConfig().Args(); len(args) != 0 {
		t.Errorf("the defaults render as %q, want nothing", args)
	}
	want := DefaultConfig()
	want.NATS = natsx.ConnConfig{URL: "nats://10.0.0.1:4222", User: "event-processor", Password: "pw with spaces"}
	want.Provisioning.Provision = false
	want.Provisioning.Topology.Limits = map[string]natsx.Limits{"WORLD": {MaxAge: 12 * time.Hour}}
	want.Graph.URL, want.Graph.Password = "ws://graph:8182/gremlin", "secret"
	want.Admin, want.LogLevel, want.AttestKeys = "127.0.0.1:9999", "warn", "/keys"
	want.MaxInFlight, want.Prune.Horizon = 7, 3*time.Hour

	var fromArgs Config
	fs := flag.NewFlagSet("event-processor", flag.ContinueOnError)
	fromArgs.RegisterFlags(fs)
	if err := fs.Parse(want.Args()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromArgs, want) {
		t.Errorf("argv %q parses as\n%+v, want\n%+v", want.Args(), fromArgs, want)
	}

	for _, kv := range want.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	var fromEnv Config
	fs = flag.NewFlagSet("event-processor", flag.ContinueOnError)
	fromEnv.RegisterFlags(fs)
	if err := config.Parse(fs, nil, config.Prefix); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromEnv, want) {
		t.Errorf("environment %q parses as\n%+v, want\n%+v", want.Env(), fromEnv, want)
	}
}
