package deploy

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"
	"sigs.k8s.io/yaml"
)

const composeDir = "compose"

// loadCompose loads deploy/compose as `docker compose` does from that directory: the
// compose-spec loader validates the file against the Compose Specification's schema, merges
// the YAML anchors, interpolates ${VAR} from .env and normalises.
func loadCompose(t *testing.T, interpolate bool) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(composeDir, "compose.yaml")},
		cli.WithWorkingDirectory(composeDir), cli.WithEnvFiles(), cli.WithDotEnv, cli.WithInterpolation(interpolate))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose-spec loader: %v", err)
	}
	return p
}

// composeProgram is the program a Worldgate service runs ("worldgate provision" for the CLI's
// provision command), from its build target.
func composeProgram(s types.ServiceConfig) string {
	if s.Build == nil {
		return ""
	}
	if s.Build.Target == "worldgate" && len(s.Command) > 0 {
		return "worldgate " + s.Command[0]
	}
	return s.Build.Target
}

// TestComposeLoads checks the laptop deployment as a whole: a three-node NATS cluster,
// JanusGraph, Prometheus and Grafana with the agreed configuration paths, and every worker and
// MCP server as its own service.
func TestComposeLoads(t *testing.T) {
	p := loadCompose(t, true)
	for _, name := range []string{"nats-1", "nats-2", "nats-3", "janusgraph", "provision", "gate", "event-processor", "ai-worker",
		"mcp-world", "mcp-lore", "mcp-classify", "prometheus", "grafana"} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("no service %s", name)
		}
	}
	mounts := func(svc string) map[string]string {
		out := map[string]string{}
		for _, v := range p.Services[svc].Volumes {
			if v.Type == types.VolumeTypeBind {
				rel, err := filepath.Rel(mustAbs(t, "."), v.Source)
				if err != nil {
					t.Fatal(err)
				}
				out[filepath.ToSlash(rel)] = v.Target
			}
		}
		return out
	}
	// The paths agreed with deploy/prometheus, deploy/grafana and deploy/nats (docs/deploy.md).
	want := map[string]map[string]string{
		"prometheus": {"prometheus": "/etc/prometheus"},
		"grafana":    {"grafana/provisioning": "/etc/grafana/provisioning", "grafana/dashboards": "/var/lib/grafana/dashboards/worldgate"},
		"nats-1":     {"compose/nats-1.conf": "/etc/nats/nats-server.conf", "nats/auth.conf": "/etc/nats/auth.conf"},
		"nats-2":     {"compose/nats-2.conf": "/etc/nats/nats-server.conf", "nats/auth.conf": "/etc/nats/auth.conf"},
		"nats-3":     {"compose/nats-3.conf": "/etc/nats/nats-server.conf", "nats/auth.conf": "/etc/nats/auth.conf"},
		"gate":       {"kubernetes/base/templates.json": "/etc/worldgate/templates.json"},
	}
	for svc, m := range want {
		got := mounts(svc)
		for src, dst := range m {
			if got[src] != dst {
				t.Errorf("%s: want deploy/%s mounted at %s, mounts are %v", svc, src, dst, got)
			}
			if _, err := os.Stat(src); err != nil && !strings.HasPrefix(src, "prometheus") && !strings.HasPrefix(src, "grafana") && !strings.HasPrefix(src, "nats/") {
				t.Errorf("%s: %v", svc, err)
			}
		}
	}
	// The loader only warns of a variable that is not set: here it is an error.
	dotenv, err := os.ReadFile(filepath.Join(composeDir, ".env"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(composeDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(:?-[^}]*)?\}`).FindAllStringSubmatch(string(raw), -1) {
		if m[2] == "" && !regexp.MustCompile(`(?m)^`+m[1]+`=.+$`).Match(dotenv) {
			t.Errorf("compose.yaml uses ${%s}, which .env does not set", m[1])
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestComposeWorkers checks each Worldgate service: built from its Dockerfile target, non-root,
// read-only, without capabilities or privilege escalation, with the image's health check, started
// only after what it needs is healthy (or, for the topology, done), configured only through
// variables and arguments that are real flags of its program, and given credentials only by
// interpolation from .env, never written in compose.yaml.
func TestComposeWorkers(t *testing.T) {
	p := loadCompose(t, true)
	raw := loadCompose(t, false)
	stages, _ := parseDockerfile(t)
	var worldgateServices []string
	for name, s := range p.Services {
		if s.Build != nil {
			worldgateServices = append(worldgateServices, name)
		}
	}
	slices.Sort(worldgateServices)
	if want := []string{"ai-worker", "edge", "event-processor", "gate", "keys", "mcp-classify", "mcp-lore", "mcp-propose", "mcp-world", "memory-writer", "provision"}; !slices.Equal(worldgateServices, want) {
		t.Errorf("services built from deploy/docker/Dockerfile: %v, want %v", worldgateServices, want)
	}
	for _, name := range worldgateServices {
		s := p.Services[name]
		t.Run(name, func(t *testing.T) {
			where := "compose " + name
			if s.Build.Dockerfile != "deploy/docker/Dockerfile" || filepath.Clean(s.Build.Context) != repoRoot {
				t.Errorf("build %s in %s, want deploy/docker/Dockerfile in the repository root", s.Build.Dockerfile, s.Build.Context)
			}
			if _, ok := stages[s.Build.Target]; !ok {
				t.Errorf("build target %q is not a stage of the Dockerfile", s.Build.Target)
			}
			if !strings.HasPrefix(s.Image, "worldgate/"+s.Build.Target+":") {
				t.Errorf("image %s, want worldgate/%s:<version>", s.Image, s.Build.Target)
			}
			prog := composeProgram(s)
			uid, _, _ := strings.Cut(s.User, ":")
			if uid == "" || uid == "0" || uid == "root" {
				t.Errorf("user %q: want the non-root uid", s.User)
			}
			if !s.ReadOnly {
				t.Error("read_only: want a read-only root filesystem")
			}
			if !slices.Contains(s.CapDrop, "ALL") {
				t.Errorf("cap_drop %v: want ALL", s.CapDrop)
			}
			if !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
				t.Errorf("security_opt %v: want no-new-privileges:true", s.SecurityOpt)
			}
			if s.Privileged {
				t.Error("privileged")
			}
			if name != "provision" && name != "keys" {
				hc := s.HealthCheck
				if hc == nil || hc.Disable || len(hc.Test) < 2 || hc.Test[0] != "CMD" || hc.Test[1] != "/usr/local/bin/healthcheck" {
					t.Errorf("healthcheck %+v: want [CMD /usr/local/bin/healthcheck]", hc)
				}
			}
			for dep, d := range s.DependsOn {
				if d.Condition != types.ServiceConditionHealthy && d.Condition != types.ServiceConditionCompletedSuccessfully {
					t.Errorf("depends_on %s: condition %q, want service_healthy or service_completed_successfully", dep, d.Condition)
				}
				if d.Condition == types.ServiceConditionHealthy && p.Services[dep].HealthCheck == nil {
					t.Errorf("depends_on %s healthy, but %s has no health check", dep, dep)
				}
			}
			env := s.Environment
			usesNATS := env["WORLDGATE_NATS_URL"] != nil || env["WORLDGATE_MCP_NATS_URL"] != nil
			if usesNATS && name != "provision" && s.DependsOn["provision"].Condition != types.ServiceConditionCompletedSuccessfully {
				t.Error("a NATS client must start after provision completed (workers may not create streams)")
			}
			usesGraph := false
			for k, v := range env {
				checkEnv(t, where, prog, k)
				if strings.HasSuffix(k, "GRAPH_URL") && v != nil && strings.Contains(*v, "janusgraph") {
					usesGraph = true
				}
			}
			if usesGraph && s.DependsOn["janusgraph"].Condition != types.ServiceConditionHealthy {
				t.Error("uses the graph, so depends_on janusgraph: service_healthy")
			}
			args := s.Command
			if strings.HasPrefix(prog, "worldgate ") {
				args = args[1:]
			}
			checkArgs(t, where, prog, args)
			checkRequired(t, where, prog, args, func(env string) bool { return env != "" && s.Environment[env] != nil })
			for k, v := range raw.Services[name].Environment {
				secret := regexp.MustCompile(`(PASSWORD|TOKEN|SECRET|API_KEY)$`).MatchString(k)
				if secret && (v == nil || !strings.HasPrefix(*v, "${")) {
					t.Errorf("%s is written in compose.yaml; credentials come from .env by ${…}", k)
				}
			}
			if strings.HasPrefix(s.Build.Target, "mcp-") {
				if env["WORLDGATE_MCP_TOKEN_FILE"] == nil || len(s.Secrets) == 0 {
					t.Error("an MCP server authenticates its clients: token file from a compose secret")
				}
				if env["WORLDGATE_MCP_NO_AUTH"] != nil {
					t.Error("-no-auth")
				}
			}
		})
	}
}

// TestComposeCredentialsAgree checks that .env gives every NATS user of deploy/nats/auth.conf
// a password, that the nodes receive all of them, that each service connects as a user that
// exists, and that the MCP clients' tokens are those of the token file with the scopes they need.
func TestComposeCredentialsAgree(t *testing.T) {
	p := loadCompose(t, true)
	auth, err := os.ReadFile("nats/auth.conf")
	if err != nil {
		t.Fatalf("%v (generated by `worldgate nats-config`, see docs/nats-permissions.md)", err)
	}
	vars := regexp.MustCompile(`\$(WORLDGATE_NATS_[A-Z0-9_]+_PASSWORD)`).FindAllStringSubmatch(string(auth), -1)
	users := regexp.MustCompile(`user: "([^"]+)"`).FindAllStringSubmatch(string(auth), -1)
	if len(vars) == 0 || len(vars) != len(users) {
		t.Fatalf("nats/auth.conf: %d users, %d password variables", len(users), len(vars))
	}
	for _, n := range []string{"nats-1", "nats-2", "nats-3"} {
		for _, v := range vars {
			if val := p.Services[n].Environment[v[1]]; val == nil || *val == "" {
				t.Errorf("%s: %s is not set (nats-server refuses to start)", n, v[1])
			}
		}
	}
	userNames := map[string]bool{}
	for _, u := range users {
		userNames[u[1]] = true
	}
	for name, s := range p.Services {
		for _, k := range []string{"WORLDGATE_NATS_USER", "WORLDGATE_MCP_NATS_USER"} {
			if u := s.Environment[k]; u != nil && !userNames[*u] {
				t.Errorf("%s connects as NATS user %q, which deploy/nats/auth.conf does not define", name, *u)
			}
		}
	}
	var tokens []struct {
		Token, Subject string
		Scopes         []string
	}
	data, err := os.ReadFile(filepath.Join(composeDir, "mcp-tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &tokens); err != nil {
		t.Fatal(err)
	}
	scopes := map[string][]string{}
	for _, tk := range tokens {
		scopes[tk.Token] = tk.Scopes
	}
	need := map[string][]string{
		"ai-worker/WORLDGATE_MCP_TOKEN": {"world:read", "lore:read", "classify:read"},
		"gate/WORLDGATE_CLASSIFY_TOKEN": {"classify:read"},
	}
	for k, want := range need {
		svc, env, _ := strings.Cut(k, "/")
		v := p.Services[svc].Environment[env]
		if v == nil {
			t.Errorf("%s: %s not set", svc, env)
			continue
		}
		got, ok := scopes[*v]
		if !ok {
			t.Errorf("%s: %s is not a token of mcp-tokens.json", svc, env)
		}
		for _, s := range want {
			if !slices.Contains(got, s) {
				t.Errorf("%s: its token lacks scope %s", svc, s)
			}
		}
	}
}

// TestComposeNATSCluster loads each node's configuration with nats-server's own parser, the
// auth include resolved as in the container, and checks it forms one JetStream cluster.
func TestComposeNATSCluster(t *testing.T) {
	auth, err := os.ReadFile("nats/auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range regexp.MustCompile(`\$(WORLDGATE_NATS_[A-Z0-9_]+_PASSWORD)`).FindAllStringSubmatch(string(auth), -1) {
		t.Setenv(v[1], "test-password")
	}
	names := map[string]bool{}
	for _, n := range []string{"nats-1", "nats-2", "nats-3"} {
		dir := t.TempDir()
		conf, err := os.ReadFile(filepath.Join(composeDir, n+".conf"))
		if err != nil {
			t.Fatal(err)
		}
		must(t, os.WriteFile(filepath.Join(dir, "nats-server.conf"), conf, 0o600))
		must(t, os.WriteFile(filepath.Join(dir, "auth.conf"), auth, 0o600))
		o, err := server.ProcessConfigFile(filepath.Join(dir, "nats-server.conf"))
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if o.ServerName != n || names[o.ServerName] {
			t.Errorf("%s: server_name %q", n, o.ServerName)
		}
		names[o.ServerName] = true
		if !o.JetStream || o.StoreDir != "/data/jetstream" {
			t.Errorf("%s: JetStream %v in %q, want on in /data/jetstream (the mounted volume)", n, o.JetStream, o.StoreDir)
		}
		if o.Cluster.Name != "worldgate" || o.Cluster.Port != 6222 || len(o.Routes) != 3 {
			t.Errorf("%s: cluster %q port %d with %d routes, want worldgate, 6222, all three nodes", n, o.Cluster.Name, o.Cluster.Port, len(o.Routes))
		}
		for _, r := range o.Routes {
			host, port, _ := net.SplitHostPort(r.Host)
			if !regexp.MustCompile(`^nats-[123]$`).MatchString(host) || port != "6222" {
				t.Errorf("%s: route %s", n, r)
			}
		}
		if o.Port != 4222 || o.HTTPPort != 8222 {
			t.Errorf("%s: client port %d, monitoring %d; want 4222 and 8222 (health checks, KEDA)", n, o.Port, o.HTTPPort)
		}
		if len(o.Users) < 2 || o.Users[0].Password != "test-password" {
			t.Errorf("%s: the users of auth.conf were not included", n)
		}
	}
}

// TestComposePrometheusTargets checks that each scrape target of deploy/prometheus/prometheus.yml
// is a compose service and the admin port of its program.
func TestComposePrometheusTargets(t *testing.T) {
	data, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, true)
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				host, port, _ := net.SplitHostPort(target)
				s, ok := p.Services[host]
				if !ok {
					t.Errorf("prometheus job %s scrapes %s: no such compose service", sc.JobName, target)
					continue
				}
				if s.Build == nil {
					continue
				}
				prog, _ := programNamed(s.Build.Target)
				if port != itoa(prog.adminPort) {
					t.Errorf("prometheus job %s scrapes %s, but %s's admin port is %d", sc.JobName, target, host, prog.adminPort)
				}
			}
		}
	}
}

// TestTemplatesFile checks the replay gate's templates file against `worldgate templates -json`
// (-update rewrites it).
func TestTemplatesFile(t *testing.T) {
	var have map[string]string
	data, err := os.ReadFile("kubernetes/base/templates.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &have); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, tpl := range templates {
		want[tpl.ID+"@"+tpl.Version] = tpl.SHA256
	}
	if len(want) == 0 {
		t.Fatal("worldgate templates -json listed nothing")
	}
	if *update { // -update rewrites the file (a new prompt template: docs/extending.md)
		b, err := json.MarshalIndent(want, "", "  ")
		must(t, err)
		must(t, os.WriteFile("kubernetes/base/templates.json", append(b, '\n'), 0o644))
		have = want
	}
	for k, v := range want {
		if have[k] != v {
			t.Errorf("kubernetes/base/templates.json: %s is %q, worldgate templates says %q: rewrite the file from `worldgate templates -json`", k, have[k], v)
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			t.Errorf("kubernetes/base/templates.json: %s is not a template", k)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
