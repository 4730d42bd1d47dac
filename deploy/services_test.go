package deploy

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/deploy/internal/cli"
)

// The deployment files are checked against the programs themselves: TestMain builds every
// binary once and reads its real flags from `-h` (deploy/internal/cli).

// program is one binary of services/.
type program struct {
	name      string // binary, image target (Dockerfile stage) and compose/Kubernetes base name
	about     string // what it is, for docs/configuration.md
	envPrefix string // WORLDGATE_, WORLDGATE_GRAPHD_ or WORLDGATE_MCP_
	// adminPort is the port of the image's admin address (/metrics, /healthz, /readyz); 0 when it
	// has none. listenPort is the served port of a server (MCP, Gremlin).
	adminPort, listenPort int
}

var programs = []program{
	{name: "worldgate", envPrefix: "WORLDGATE_", about: "The operator's CLI; its commands follow below."},
	{name: "graphd", envPrefix: "WORLDGATE_GRAPHD_", listenPort: 8182,
		about: "The embedded Gremlin server, for development and tests (production runs JanusGraph or Neptune). Variables `WORLDGATE_GRAPHD_*`. No admin port; the image listens on `0.0.0.0:8182` with data in `/data`."},
	{name: "gate", envPrefix: "WORLDGATE_", adminPort: 9410,
		about: "The proposal gates: one per process (`-gate schema`, Kubernetes) or several (`-gate all`, compose). Variables `WORLDGATE_*`; the image binds the admin address on `0.0.0.0:9410`."},
	{name: "event-processor", envPrefix: "WORLDGATE_", adminPort: 9105,
		about: "Applies validated proposals to the graph, the only holder of its write credentials. Variables `WORLDGATE_*`; the image binds the admin address on `0.0.0.0:9105`."},
	{name: "memory-writer", envPrefix: "WORLDGATE_", adminPort: 9106,
		about: "Keeps the interaction memory (get-recent-dialogue, [interaction-memory.md](interaction-memory.md)) from committed events: NATS user `memory-writer`, durable `memory-writer` on COMMITTED, KV bucket `worldgate-memory`. Variables `WORLDGATE_*`; the image binds the admin address on `0.0.0.0:9106`."},
	{name: "ai-worker", envPrefix: "WORLDGATE_", adminPort: 9420,
		about: "The agent roles. Variables `WORLDGATE_*` (the `-mcp-*` flags too: `WORLDGATE_MCP_TOKEN`); the API key is read from the variable `-llm-api-key-env` names (`WORLDGATE_LLM_API_KEY`). The image binds the admin address on `0.0.0.0:9420`."},
	{name: "mcp-world", envPrefix: "WORLDGATE_MCP_", adminPort: 9401, listenPort: 7401,
		about: "MCP server of the world tools. Variables `WORLDGATE_MCP_*`; the image listens on `0.0.0.0:7401` (MCP at `/mcp`) and `0.0.0.0:9401` (admin). `mcp-world issue-token` signs a bearer JWT (`-jwt-secret`, `-subject`, `-scopes`, `-ttl`)."},
	{name: "mcp-lore", envPrefix: "WORLDGATE_MCP_", adminPort: 9402, listenPort: 7402,
		about: "MCP server of the lore tools. Variables `WORLDGATE_MCP_*`; the image listens on `0.0.0.0:7402` and `0.0.0.0:9402` (admin)."},
	{name: "edge", envPrefix: "WORLDGATE_", adminPort: 9430, listenPort: 8080,
		about: "The HTTP API for game servers and browsers: publish envelopes, receive outcomes over SSE or long poll, the /play console. Variables `WORLDGATE_*`; the image listens on `0.0.0.0:8080` and `0.0.0.0:9430` (admin)."},
	{name: "mcp-classify", envPrefix: "WORLDGATE_MCP_", adminPort: 9403, listenPort: 7403,
		about: "MCP server of classification and moderation. Variables `WORLDGATE_MCP_*`; the image listens on `0.0.0.0:7403` and `0.0.0.0:9403` (admin)."},
	{name: "mcp-propose", envPrefix: "WORLDGATE_MCP_", adminPort: 9404, listenPort: 7404,
		about: "MCP server of outside narrators' proposals (scope `propose`), publishing as NATS user `mcp-propose` ([mcp-propose.md](mcp-propose.md)). Variables `WORLDGATE_MCP_*`; the image listens on `0.0.0.0:7404` and `0.0.0.0:9404` (admin)."},
}

func programNamed(name string) (program, bool) {
	i := slices.IndexFunc(programs, func(p program) bool { return p.name == name })
	if i < 0 {
		return program{}, false
	}
	return programs[i], true
}

// consumer is a JetStream durable consumer a worker reads.
type consumer struct{ stream, durable string }

// aiRoles are the ai-worker's agent roles, as `ai-worker -h` lists them ("comma-separated roles
// to run (ambience,…); empty: all"); each reads stream WORLD on the durable ai-<role>
// (services/ai-worker/roles: Role.Durable), and every ai-worker reads rejections on
// ai-rejections (aiworker.RejectionsDurable). Read from the program, so a new role's consumer
// without a KEDA trigger fails TestKubernetesAutoscaling.
func aiRoles(t *testing.T) []string {
	t.Helper()
	return listedIn(t, "ai-worker", "roles")
}

// worker is one deployable that consumes from JetStream: it gets its own compose service,
// Kubernetes Deployment and ScaledObject, and its own NATS user.
type worker struct {
	name      string // compose service, Deployment, ScaledObject and NATS user
	program   string
	args      []string // extra arguments: gate -gate <name>
	consumers []consumer
}

// workers lists every worker: one per gate (gate -gate <g> on durable gate-<g>, shared by its
// replicas: services/gate/gates.Register), the event-processor (durable event-processor on
// proposals.validated) and the ai-worker.
func workers(t *testing.T) []worker {
	var ws []worker
	for _, g := range gateNames(t) {
		ws = append(ws, worker{name: "gate-" + g, program: "gate", args: []string{"-gate", g},
			consumers: []consumer{{"PROPOSALS", "gate-" + g}}})
	}
	// The event-processor's replicas share the partitions of the validated proposals, one
	// durable each (runtime.PartitionDurable; natsx.DefaultPartitions of them: this module
	// builds without the others, and `worldgate dev` shows the same names), and drain the
	// legacy subject on their own durable.
	var ep []consumer
	for p := range 16 {
		ep = append(ep, consumer{"PROPOSALS", fmt.Sprintf("event-processor-p%02d", p)})
	}
	ep = append(ep, consumer{"PROPOSALS", "event-processor"})
	ws = append(ws, worker{name: "event-processor", program: "event-processor", consumers: ep},
		worker{name: "memory-writer", program: "memory-writer", consumers: []consumer{{"COMMITTED", "memory-writer"}}})
	ai := worker{name: "ai-worker", program: "ai-worker"}
	for _, r := range aiRoles(t) {
		ai.consumers = append(ai.consumers, consumer{"WORLD", "ai-" + r})
	}
	ai.consumers = append(ai.consumers, consumer{"PROPOSALS", "ai-rejections"})
	return append(ws, ai)
}

// mcpServers are the MCP servers: deployed on their own too, but HTTP servers, not consumers.
var mcpServers = []string{"mcp-world", "mcp-lore", "mcp-classify"}

var (
	repoRoot string
	commands = map[string]cli.Command{} // by program name, and "worldgate <sub>" for the CLI
	// templates are the prompt templates, as `worldgate templates -json` lists them.
	templates []struct{ ID, Version, SHA256 string }
	update    = flag.Bool("update", false, "rewrite docs/configuration.md from the programs' flags and kubernetes/base/templates.json from the prompt templates")
)

func TestMain(m *testing.M) {
	flag.Parse()
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "deploy tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setup() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	repoRoot = filepath.Dir(wd)
	dir, err := os.MkdirTemp("", "worldgate-deploy-bins-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var pkgs []string
	for _, p := range programs {
		pkgs = append(pkgs, "github.com/worldgate/worldgate/services/"+p.name)
	}
	bins, err := cli.Build(ctx, repoRoot, dir, pkgs...)
	if err != nil {
		return err
	}
	for _, p := range programs {
		if p.name == "worldgate" {
			continue
		}
		c, err := cli.Help(ctx, p.name, bins[p.name])
		if err != nil {
			return err
		}
		commands[p.name] = c
	}
	out, err := exec.CommandContext(ctx, bins["worldgate"], "templates", "-json").Output()
	if err != nil {
		return fmt.Errorf("worldgate templates -json: %w", err)
	}
	if err := json.Unmarshal(out, &templates); err != nil {
		return fmt.Errorf("worldgate templates -json: %w", err)
	}
	subs, err := cli.Subcommands(ctx, bins["worldgate"])
	if err != nil {
		return err
	}
	for _, s := range subs {
		c, err := cli.Help(ctx, "worldgate "+s.Name, bins["worldgate"], s.Name)
		if err != nil {
			// A command with verbs of its own ("proposals list|show …", "world load -f …") takes
			// its flags after the verb: ask its first verb, from the summary.
			if m := regexp.MustCompile(`^` + s.Name + ` ([a-z]+)`).FindStringSubmatch(s.Summary); m != nil {
				c, err = cli.Help(ctx, "worldgate "+s.Name, bins["worldgate"], s.Name, m[1])
			}
			if err != nil {
				c = cli.Command{Name: "worldgate " + s.Name}
			}
		}
		c.Summary = s.Summary
		commands["worldgate "+s.Name] = c
	}
	return nil
}

// gateNames are the gates, as `gate -h` lists them ("comma-separated names (schema,…) or all").
func gateNames(t *testing.T) []string {
	t.Helper()
	return listedIn(t, "gate", "gate")
}

// listedIn reads the names that flag -flag of program lists in its usage, in parentheses and
// separated by commas: lower-case letters, digits and dashes (a gate named night-curfew).
func listedIn(t *testing.T, program, flag string) []string {
	t.Helper()
	f, ok := commands[program].Lookup(flag)
	if !ok {
		t.Fatalf("%s has no -%s flag", program, flag)
	}
	m := listed.FindStringSubmatch(f.Usage)
	if m == nil {
		t.Fatalf("cannot read the names from %s -%s's usage %q", program, flag, f.Usage)
	}
	return splitNames(m[1])
}

func splitNames(s string) []string { return strings.Split(s, ",") }

var listed = regexp.MustCompile(`\(([a-z0-9-]+(?:,[a-z0-9-]+)*)\)`)

// checkEnv fails the test when env (a variable set for program) is not one of its flags'
// variables. apiKeyEnvs are variables a flag names (ai-worker -llm-api-key-env): also allowed.
func checkEnv(t *testing.T, where, prog, env string) {
	t.Helper()
	c, ok := commands[prog]
	if !ok {
		t.Fatalf("%s: unknown program %q", where, prog)
	}
	if _, ok := c.LookupEnv(env); ok {
		return
	}
	for _, f := range c.Flags {
		if strings.HasSuffix(f.Name, "-env") && strings.Trim(f.Default, `"`) == env {
			return
		}
	}
	t.Errorf("%s: %s sets no flag of %s (its variables: %s)", where, env, prog, strings.Join(envNames(c), ", "))
}

// checkArgs fails the test when args (command-line arguments for program) name a flag it lacks.
func checkArgs(t *testing.T, where, prog string, args []string) {
	t.Helper()
	c := commands[prog]
	if strings.HasPrefix(prog, "worldgate") && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, ok := commands["worldgate "+args[0]]
		if !ok {
			t.Errorf("%s: worldgate has no command %q", where, args[0])
			return
		}
		c, args = sub, args[1:]
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if _, ok := c.Lookup(name); !ok {
			t.Errorf("%s: %s has no flag -%s", where, c.Name, name)
		}
	}
}

// checkRequired fails the test when a flag of program whose usage says it is required (it ends
// in "required" or says "(required)") is set neither by args nor by a variable (set reports
// whether the deployment sets a variable): the program would exit at start.
func checkRequired(t *testing.T, where, prog string, args []string, set func(env string) bool) {
	t.Helper()
	c := commands[prog]
	if strings.HasPrefix(prog, "worldgate") && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		c, args = commands["worldgate "+args[0]], args[1:]
	}
	required := regexp.MustCompile(`(?:\(required\)|[;,] required)\s*$|\(required\)`)
	for _, f := range c.Flags {
		if !required.MatchString(f.Usage) {
			continue
		}
		given := set(f.Env)
		for _, a := range args {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			given = given || strings.HasPrefix(a, "-") && name == f.Name
		}
		if !given {
			t.Errorf("%s: %s requires -%s (%s), which is not set", where, c.Name, f.Name, f.Env)
		}
	}
}

func envNames(c cli.Command) []string {
	var out []string
	for _, f := range c.Flags {
		out = append(out, f.Env)
	}
	return out
}

func TestFlagsAreRead(t *testing.T) {
	for _, p := range programs {
		if p.name == "worldgate" {
			continue
		}
		c := commands[p.name]
		for _, f := range c.Flags {
			if f.Env != p.envPrefix+strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(f.Name)) {
				t.Errorf("%s -%s: environment variable %q does not follow %s<FLAG>", p.name, f.Name, f.Env, p.envPrefix)
			}
		}
		if p.adminPort != 0 {
			f, ok := c.Lookup("admin")
			if !ok || !strings.HasSuffix(strings.Trim(f.Default, `"`), fmt.Sprintf(":%d", p.adminPort)) {
				t.Errorf("%s: -admin default %q, want port %d (the images and manifests use it)", p.name, f.Default, p.adminPort)
			}
		}
		if p.listenPort != 0 {
			f, ok := c.Lookup("listen")
			if !ok || !strings.HasSuffix(strings.Trim(f.Default, `"`), fmt.Sprintf(":%d", p.listenPort)) {
				t.Errorf("%s: -listen default %q, want port %d", p.name, f.Default, p.listenPort)
			}
		}
	}
	if len(gateNames(t)) < 8 {
		t.Errorf("gates %v: fewer than the eight of the architecture", gateNames(t))
	}
	if _, ok := commands["worldgate provision"]; !ok {
		t.Error("worldgate has no provision command: compose and Kubernetes run it to create the streams")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
