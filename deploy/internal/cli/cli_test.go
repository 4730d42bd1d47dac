package cli

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// The parser reads what flag.PrintDefaults and shared/config print; a flag set of every kind
// checks that each comes back with its type, default and variable.
func TestParseReadsPrintDefaults(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.String("token", "", "a `secret` token")
	fs.Bool("provision", true, "provision at start")
	fs.Bool("no-auth", false, "serve without authentication")
	fs.Int("replicas", 1, "stream replicas")
	fs.Duration("ack-wait", 30*time.Second, "how long\nbefore redelivery")
	fs.Float64("rate", 50, "calls per second")
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	b.WriteString("\nEvery flag can also be set by environment:\n")
	fs.VisitAll(func(f *flag.Flag) {
		b.WriteString("  WORLDGATE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")) + "  (-" + f.Name + ")\n")
	})
	flags, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	c := Command{Flags: flags}
	want := []Flag{
		{Name: "ack-wait", Type: "duration", Default: "30s", Usage: "how long before redelivery", Env: "WORLDGATE_ACK_WAIT"},
		{Name: "nats-url", Type: "string", Default: `"nats://127.0.0.1:4222"`, Usage: "NATS server URL", Env: "WORLDGATE_NATS_URL"},
		{Name: "no-auth", Type: "bool", Usage: "serve without authentication", Env: "WORLDGATE_NO_AUTH"},
		{Name: "provision", Type: "bool", Default: "true", Usage: "provision at start", Env: "WORLDGATE_PROVISION"},
		{Name: "rate", Type: "float", Default: "50", Usage: "calls per second", Env: "WORLDGATE_RATE"},
		{Name: "replicas", Type: "int", Default: "1", Usage: "stream replicas", Env: "WORLDGATE_REPLICAS"},
		{Name: "token", Type: "secret", Usage: "a secret token", Env: "WORLDGATE_TOKEN"},
	}
	if len(flags) != len(want) {
		t.Fatalf("got %d flags, want %d: %+v", len(flags), len(want), flags)
	}
	for _, w := range want {
		got, ok := c.Lookup(w.Name)
		if !ok || got != w {
			t.Errorf("-%s: got %+v, want %+v", w.Name, got, w)
		}
		if byEnv, ok := c.LookupEnv(w.Env); !ok || byEnv.Name != w.Name {
			t.Errorf("%s: not found by its variable", w.Env)
		}
	}
}

func TestParseRefusesOutputWithoutFlags(t *testing.T) {
	if _, err := Parse([]byte("worldgate: unknown command \"x\"\n")); err == nil {
		t.Fatal("want an error")
	}
	if _, err := Parse([]byte("  -a string\n    \tusage\n\nEvery flag can also be set by environment:\n  WORLDGATE_B  (-b)\n")); err == nil {
		t.Fatal("a variable naming no flag must be an error")
	}
}

func TestReferenceTable(t *testing.T) {
	got := Reference("# R\n", []Section{
		{Title: "x", About: "About x.", Command: Command{Flags: []Flag{
			{Name: "rate-budgets", Type: "string", Default: `"{\"*\":1}"`, Usage: "budgets a|b <kind>", Env: "WORLDGATE_RATE_BUDGETS"},
			{Name: "no-auth", Type: "bool", Usage: "off", Env: "WORLDGATE_NO_AUTH"},
		}}},
		{Title: "worldgate templates"},
	})
	want := "# R\n\n## x\n\nAbout x.\n\n| flag | environment | type | default | meaning |\n| --- | --- | --- | --- | --- |\n" +
		"| `-rate-budgets` | `WORLDGATE_RATE_BUDGETS` | string | `{\"*\":1}` | budgets a\\|b &lt;kind&gt; |\n" +
		"| `-no-auth` | `WORLDGATE_NO_AUTH` | bool |  | off |\n" +
		"\n## worldgate templates\n\nNo flags.\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
