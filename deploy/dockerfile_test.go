package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerui"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	digest "github.com/opencontainers/go-digest"
)

const dockerfilePath = "docker/Dockerfile"

// offlineImages answers BuildKit's base-image look-ups without a registry: an empty linux
// image config, so the whole Dockerfile can be converted (and linted) offline.
type offlineImages struct{}

func (offlineImages) ResolveImageConfig(_ context.Context, ref string, opt sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	arch := "amd64"
	if opt.ImageOpt != nil && opt.ImageOpt.Platform != nil {
		arch = opt.ImageOpt.Platform.Architecture
	}
	cfg := []byte(fmt.Sprintf(`{"architecture":%q,"os":"linux","config":{}}`, arch))
	return ref, digest.FromBytes(cfg), cfg, nil
}

// TestDockerfileLints runs BuildKit's own checks, as `docker build --check` does: the parser,
// the instruction parser with every lint rule (experimental ones included), and the full
// conversion of every stage to LLB with its build-time rules (undefined variables and
// arguments, secrets in ARG/ENV, legacy ENV format, …). Any warning fails.
func TestDockerfileLints(t *testing.T) {
	dt, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(dt))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range res.Warnings {
		t.Errorf("parser: line %d: %s", w.Location.Start.Line, w.Short)
	}
	var warnings []string
	warn := func(rule, _, _, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		warnings = append(warnings, fmt.Sprintf("%s:%d: %s: %s", dockerfilePath, line, rule, msg))
	}
	if _, _, err := instructions.Parse(res.AST, linter.New(&linter.Config{ExperimentalAll: true, Warn: warn})); err != nil {
		t.Fatal(err)
	}
	src := llb.NewSourceMap(nil, dockerfilePath, "Dockerfile", dt)
	src.Definition = &llb.Definition{}
	lint, err := dockerfile2llb.DockerfileLint(context.Background(), dt, dockerfile2llb.ConvertOpt{
		Config:       dockerui.Config{},
		SourceMap:    src,
		MetaResolver: offlineImages{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if lint.Error != nil {
		t.Errorf("conversion: %s", lint.Error.Message)
	}
	for _, w := range lint.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		warnings = append(warnings, fmt.Sprintf("%s:%d: %s: %s", dockerfilePath, line, w.RuleName, w.Detail))
	}
	for _, w := range warnings {
		t.Error(w)
	}
}

// stage is a parsed stage with what the policy checks need.
type stage struct {
	instructions.Stage
	parent string // the stage it builds on, "" for an image
}

func parseDockerfile(t *testing.T) (map[string]stage, []string) {
	t.Helper()
	dt, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(dt))
	if err != nil {
		t.Fatal(err)
	}
	stages, _, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]stage{}
	var order []string
	for _, s := range stages {
		st := stage{Stage: s}
		if _, ok := byName[s.BaseName]; ok {
			st.parent = s.BaseName
		}
		byName[s.Name] = st
		order = append(order, s.Name)
	}
	return byName, order
}

// effective walks a stage and its parents (nearest first) and returns the last command of type
// C that applies.
func effective[C any](stages map[string]stage, name string) (C, bool) {
	var zero C
	for s, ok := stages[name]; ok; s, ok = stages[s.parent] {
		for i := len(s.Commands) - 1; i >= 0; i-- {
			if c, ok := s.Commands[i].(C); ok {
				return c, true
			}
		}
		if s.parent == "" {
			break
		}
	}
	return zero, false
}

// envOf collects the ENV of a stage and its parents.
func envOf(stages map[string]stage, name string) map[string]string {
	env := map[string]string{}
	var chain []stage
	for s, ok := stages[name]; ok; s, ok = stages[s.parent] {
		chain = append(chain, s)
		if s.parent == "" {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		for _, c := range chain[i].Commands {
			if e, ok := c.(*instructions.EnvCommand); ok {
				for _, kv := range e.Env {
					env[kv.Key] = kv.Value
				}
			}
		}
	}
	return env
}

// TestDockerfilePolicy checks what the images promise: one target per program of services/
// (and per image `make images` builds), each a static binary on a base without a shell,
// running as a numeric non-root user, with an exec-form entrypoint, a health check, and the
// admin and listen addresses bound on every interface at the ports the programs default to,
// through variables that are real flags of the program.
func TestDockerfilePolicy(t *testing.T) {
	stages, order := parseDockerfile(t)
	build, ok := stages["build"]
	if !ok {
		t.Fatal("no build stage")
	}
	var buildRun string
	for _, c := range build.Commands {
		if r, ok := c.(*instructions.RunCommand); ok {
			buildRun += strings.Join(r.CmdLine, " ")
		}
	}
	if !strings.Contains(buildRun, "CGO_ENABLED=0") {
		t.Error("the build stage must build with CGO_ENABLED=0 (static binaries for a base without libc)")
	}
	if !strings.Contains(buildRun, "./cmd/healthcheck") {
		t.Error("the build stage must build the healthcheck binary")
	}
	runtime := stages["runtime"]
	if base := runtime.BaseName; !regexp.MustCompile(`^(\$\{RUNTIME_IMAGE\}|scratch)$`).MatchString(base) {
		t.Errorf("runtime stage is FROM %s, want the distroless ${RUNTIME_IMAGE} or scratch", base)
	}
	dt, _ := os.ReadFile(dockerfilePath)
	if m := regexp.MustCompile(`(?m)^ARG RUNTIME_IMAGE=(\S+)$`).FindSubmatch(dt); m == nil ||
		!regexp.MustCompile(`^gcr\.io/distroless/static-debian\d+:nonroot$`).Match(m[1]) {
		t.Errorf("RUNTIME_IMAGE must default to a pinned distroless static nonroot image, got %q", m)
	}

	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGES := (.+)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("Makefile has no IMAGES := line (the targets `make images` builds)")
	}
	images := strings.Fields(string(m[1]))
	var want []string
	for _, p := range programs {
		want = append(want, p.name)
	}
	if !slices.Equal(sortedCopy(images), sortedCopy(want)) {
		t.Errorf("Makefile IMAGES %v, want every program %v", images, want)
	}

	for _, p := range programs {
		t.Run(p.name, func(t *testing.T) {
			s, ok := stages[p.name]
			if !ok {
				t.Fatalf("no stage %q (stages: %v)", p.name, order)
			}
			if s.parent != "runtime" {
				t.Errorf("FROM %s, want FROM runtime (the shell-less, non-root base)", s.BaseName)
			}
			user, ok := effective[*instructions.UserCommand](stages, p.name)
			if !ok {
				t.Fatal("no USER")
			}
			uid, _, _ := strings.Cut(user.User, ":")
			if !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(uid) {
				t.Errorf("USER %s: want a numeric non-root uid (runAsNonRoot can verify only a number)", user.User)
			}
			ep, ok := effective[*instructions.EntrypointCommand](stages, p.name)
			switch {
			case !ok || len(ep.CmdLine) == 0:
				t.Error("no ENTRYPOINT")
			case ep.PrependShell:
				t.Error("ENTRYPOINT in shell form: the image has no shell")
			case ep.CmdLine[0] != "/usr/local/bin/"+p.name:
				t.Errorf("ENTRYPOINT %v: want [\"/usr/local/bin/%s\"]", ep.CmdLine, p.name)
			}
			copied := false
			for _, c := range s.Commands {
				if cp, ok := c.(*instructions.CopyCommand); ok && cp.From == "build" && slices.Contains(cp.SourcePaths, "/out/"+p.name) {
					copied = true
				}
			}
			if !copied {
				t.Errorf("no COPY --from=build /out/%s", p.name)
			}
			hc, ok := effective[*instructions.HealthCheckCommand](stages, p.name)
			switch {
			case !ok:
				t.Error("no HEALTHCHECK")
			case p.adminPort == 0 && p.listenPort == 0:
				if hc.Health.Test[0] != "NONE" {
					t.Errorf("%s serves nothing: HEALTHCHECK NONE, got %v", p.name, hc.Health.Test)
				}
			default:
				if hc.Health.Test[0] != "CMD" || hc.Health.Test[1] != "/usr/local/bin/healthcheck" {
					t.Errorf("HEALTHCHECK %v: want exec form running /usr/local/bin/healthcheck", hc.Health.Test)
				}
			}
			env := envOf(stages, p.name)
			var exposed []string
			for _, c := range s.Commands {
				if e, ok := c.(*instructions.ExposeCommand); ok {
					exposed = append(exposed, e.Ports...)
				}
			}
			for k, v := range env {
				checkEnv(t, dockerfilePath+" "+p.name, p.name, k)
				if strings.HasSuffix(k, "_ADMIN") || strings.HasSuffix(k, "_LISTEN") {
					host, port, err := net.SplitHostPort(v)
					if err != nil || host != "0.0.0.0" {
						t.Errorf("%s=%s: a container must bind 0.0.0.0:<port>", k, v)
					}
					if !slices.Contains(exposed, port) {
						t.Errorf("%s=%s: port %s not EXPOSEd (%v)", k, v, port, exposed)
					}
				}
			}
			for _, port := range []int{p.adminPort, p.listenPort} {
				if port == 0 {
					continue
				}
				found := false
				for k, v := range env {
					if (strings.HasSuffix(k, "_ADMIN") || strings.HasSuffix(k, "_LISTEN")) && strings.HasSuffix(v, fmt.Sprintf(":%d", port)) {
						found = true
					}
				}
				if !found {
					t.Errorf("port %d (the program's default) is not bound by an ENV", port)
				}
			}
		})
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// TestDockerignore checks that deploy/docker/Dockerfile.dockerignore (BuildKit reads it for
// this Dockerfile instead of a root .dockerignore) sends what the build stage needs — the
// workspace file and every module of it, every program's sources — and leaves tests out.
func TestDockerignore(t *testing.T) {
	data, err := os.ReadFile(dockerfilePath + ".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := ignorefile.ReadAll(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	excluded := func(path string) bool {
		ok, err := pm.MatchesOrParentMatches(path)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	work, err := os.ReadFile(filepath.Join(repoRoot, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	need := []string{"go.work", "go.work.sum", "deploy/go.mod", "deploy/go.sum", "deploy/cmd/healthcheck/main.go"}
	for _, m := range regexp.MustCompile(`(?m)^\s*\./(\S+)$`).FindAllStringSubmatch(string(work), -1) {
		need = append(need, m[1]+"/go.mod")
	}
	for _, p := range programs {
		need = append(need, "services/"+p.name+"/main.go")
	}
	for _, p := range need {
		if excluded(p) {
			t.Errorf("%s is excluded from the build context", p)
		}
	}
	for _, p := range []string{"deploy/dockerfile_test.go", "services/gate/gates/rules_test.go", ".git/HEAD", "bin/gate", ".worldgate/endpoints.json", "deploy/compose/.env"} {
		if !excluded(p) {
			t.Errorf("%s is sent to the build", p)
		}
	}
}
