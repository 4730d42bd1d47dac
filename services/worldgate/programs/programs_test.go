package programs

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/shared/config"
)

// Every program directory under services is listed, and every listed one exists.
func TestEveryProgramIsListed(t *testing.T) {
	mains, err := filepath.Glob("../../*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, m := range mains {
		found = append(found, filepath.Base(filepath.Dir(m)))
	}
	for _, name := range found {
		if _, ok := Named(name); !ok {
			t.Errorf("services/%s is a program missing from programs.All", name)
		}
	}
	for _, p := range All {
		if p.Package != module+p.Name {
			t.Errorf("%s: package %s, want %s", p.Name, p.Package, module+p.Name)
		}
		if _, err := os.Stat(filepath.Join("../..", p.Name, "main.go")); err != nil {
			t.Errorf("%s is listed but has no main.go: %v", p.Name, err)
		}
	}
}

// Every service's configuration renders as the argv and the environment its process parses
// back into the same configuration, and its defaults as nothing: what the process harness
// starts a process with is what the test set, flag for flag.
func TestEveryServiceConfigRendersWhatItParses(t *testing.T) {
	for _, p := range All {
		if p.Config == nil {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			if args := p.Config().Args(); len(args) != 0 {
				t.Errorf("the defaults render as %q, want nothing", args)
			}
			want := p.Config()
			fs := flag.NewFlagSet(p.Name, flag.ContinueOnError)
			want.RegisterFlags(fs)
			// The flags of these that the program has (graphd has no admin, NATS or
			// provisioning flags; an MCP server has no -provision).
			set := map[string]string{"admin": "127.0.0.1:1", "nats-url": "nats://10.0.0.1:4222",
				"nats-password": "a password", "log-level": "warn", "provision": "false",
				"users": "w:a password,r:another:ro"}
			for name := range set {
				if fs.Lookup(name) == nil {
					delete(set, name)
				}
			}
			if len(set) < 2 {
				t.Fatalf("only %q of the test's flags are the program's", set)
			}
			for name, v := range set {
				if err := fs.Set(name, v); err != nil {
					t.Fatalf("-%s: %v", name, err)
				}
			}
			args := want.Args()
			if len(args) != len(set) {
				t.Errorf("argv %q, want the %d flags set", args, len(set))
			}
			got := p.Config()
			fs = flag.NewFlagSet(p.Name, flag.ContinueOnError)
			got.RegisterFlags(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("argv %q parses as\n%+v, want\n%+v", args, got, want)
			}
			var prefix string // WORLDGATE_, WORLDGATE_MCP_ for the MCP servers, WORLDGATE_GRAPHD_ for graphd
			for _, kv := range want.Env() {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
				if p, ok := strings.CutSuffix(k, "_LOG_LEVEL"); ok {
					prefix = p + "_"
				}
			}
			got = p.Config()
			fs = flag.NewFlagSet(p.Name, flag.ContinueOnError)
			got.RegisterFlags(fs)
			if err := config.Parse(fs, nil, prefix); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("environment %q parses as\n%+v, want\n%+v", want.Env(), got, want)
			}
		})
	}
}
