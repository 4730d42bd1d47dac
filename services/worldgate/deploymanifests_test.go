package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/worldgate/programs"
	"github.com/worldgate/worldgate/shared/attest"
)

// `worldgate deploy-manifests` writes the committed compose file and what is committed in
// deploy/kubernetes/base/services, and nothing else is there: a service's deployments come
// from the list of programs only.
func TestDeployManifestsWriteTheCommittedFiles(t *testing.T) {
	dir := t.TempDir()
	compose := filepath.Join(dir, "compose.yaml")
	k8s := filepath.Join(dir, "services")
	const root = "../../deploy"
	// The files it rewrites in place, and the dev overlay's keys, as copies.
	const devOverlay = root + "/kubernetes/overlays/dev"
	dev := filepath.Join(dir, "dev")
	for _, f := range []string{"kustomization.yaml", "keys", "attest-keys"} {
		copyPath(t, filepath.Join(devOverlay, f), filepath.Join(dev, f))
	}
	env := filepath.Join(dir, ".env")
	copyPath(t, root+"/compose/.env", env)
	pdb := filepath.Join(dir, "pdb.yaml")
	var out bytes.Buffer
	err := runDeployManifests(context.Background(), []string{"-compose-template", root + "/compose/compose.in.yaml",
		"-compose", compose, "-k8s", k8s, "-pdb", pdb, "-env", env, "-dev-overlay", dev, "-approvers", "ops"}, &out, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	const regenerate = "run `go generate ./services/worldgate/policy`"
	for generated, committed := range map[string]string{pdb: root + "/kubernetes/overlays/prod/pdb.yaml", env: root + "/compose/.env",
		filepath.Join(dev, "kustomization.yaml"): devOverlay + "/kustomization.yaml"} {
		a, _ := os.ReadFile(generated)
		if b, err := os.ReadFile(committed); err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from what deploy-manifests writes (%v): %s", committed, err, regenerate)
		}
	}
	if strings.Contains(out.String(), ".key\n") {
		t.Errorf("deploy-manifests made a gate's development key pair, which %s lacks: %s\n%s", devOverlay, regenerate, out.String())
	}
	a, _ := os.ReadFile(compose)
	if b, err := os.ReadFile(root + "/compose/compose.yaml"); err != nil || !bytes.Equal(a, b) {
		t.Errorf("deploy/compose/compose.yaml differs from what deploy-manifests writes (%v): %s", err, regenerate)
	}
	want, err := os.ReadDir(k8s)
	if err != nil {
		t.Fatal(err)
	}
	const committed = root + "/kubernetes/base/services"
	have, err := os.ReadDir(committed)
	if err != nil {
		t.Fatal(err)
	}
	if len(have) != len(want) {
		t.Errorf("%s has %d files, deploy-manifests writes %d: %s", committed, len(have), len(want), regenerate)
	}
	for _, e := range want {
		a, _ := os.ReadFile(filepath.Join(k8s, e.Name()))
		b, err := os.ReadFile(filepath.Join(committed, e.Name()))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s/%s differs from what deploy-manifests writes (%v): %s", committed, e.Name(), err, regenerate)
		}
	}
}

// A new service is one entry in the list of programs: its compose service (depending on what
// it uses) and its Kubernetes manifest, listed in the kustomization, follow from it.
func TestDeployManifestsOfANewService(t *testing.T) {
	progs := append(slices.Clone(programs.All), programs.Program{Name: "mcp-weather",
		Package: "github.com/worldgate/worldgate/services/mcp-weather",
		Deploy: &programs.Deployment{EnvPrefix: "WORLDGATE_", NATSUser: "mcp-weather", AdminPort: 9499,
			Graph: programs.GraphReader, MCP: []programs.MCPUse{{Env: "CLASSIFY_URL", Server: "mcp-classify"}},
			MCPToken: "CLASSIFY_TOKEN", K8s: &programs.K8s{
				KEDA: &programs.KEDA{Max: 2, Triggers: []programs.Trigger{{Stream: "WORLD", Consumer: "mcp-weather", Lag: "10"}}}}}})
	compose, err := composeFile("services:\n"+composeMarker, "compose.in.yaml", progs)
	if err != nil {
		t.Fatal(err)
	}
	_, service, _ := strings.Cut(compose, "\n  mcp-weather:\n")
	for _, want := range []string{"image: worldgate/mcp-weather:", "WORLDGATE_NATS_PASSWORD: ${WORLDGATE_NATS_MCP_WEATHER_PASSWORD}",
		"WORLDGATE_CLASSIFY_URL: http://mcp-classify:7403/mcp", "WORLDGATE_CLASSIFY_TOKEN: ${WORLDGATE_MCP_MCP_WEATHER_TOKEN}",
		"janusgraph: {condition: service_healthy}", "mcp-classify: {condition: service_healthy}"} {
		if !strings.Contains(service, want) {
			t.Errorf("its compose service has no %q:\n%s", want, service)
		}
	}
	files, err := serviceManifests(progs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(files["kustomization.yaml"], "  - mcp-weather.yaml\n") {
		t.Errorf("the kustomization does not list it:\n%s", files["kustomization.yaml"])
	}
	for _, want := range []string{"image: worldgate/mcp-weather", "containerPort: 9499", "key: mcp-classify-url",
		"kind: ScaledObject", "consumer: mcp-weather"} {
		if !strings.Contains(files["mcp-weather.yaml"], want) {
			t.Errorf("its manifest has no %q:\n%s", want, files["mcp-weather.yaml"])
		}
	}

	// One it cannot deploy is refused, not written half.
	progs[len(progs)-1].Deploy.MCP[0].Server = "mcp-nowhere"
	if _, err := serviceManifests(progs); err == nil || !strings.Contains(err.Error(), "mcp-nowhere is not a deployed MCP server") {
		t.Errorf("a service calling an MCP server not deployed: %v", err)
	}
}

// Every service of the list of programs is deployed (compose and Kubernetes follow from its
// Deploy), except graphd, the development graph server (overlays/dev deploys it by hand; a
// production cluster runs JanusGraph or Neptune), and the worldgate CLI (compose's provision
// and keys, the base's provision Job).
func TestEveryServiceIsDeployed(t *testing.T) {
	for _, p := range programs.All {
		if p.Config != nil && p.Deploy == nil && p.Name != "graphd" {
			t.Errorf("%s is a service with no Deploy in programs.All: it would be missing from compose and Kubernetes", p.Name)
		}
	}
}

// A new gate is one entry in the registry: its PodDisruptionBudget in prod, its NATS password
// in compose's .env and the dev overlay, and its dev signing key's Secret, key pair and public
// key in worldgate-attest-keys follow from it.
func TestDeployManifestsOfANewGate(t *testing.T) {
	specs := append(gates.Builtin().Specs(), gates.Spec{Name: "night-curfew"})
	users, err := natsUsers([]string{"ops"})
	if err != nil {
		t.Fatal(err)
	}
	users = append(users, "gate-night-curfew")
	if pdb := prodPDBs(specs, programs.All); !strings.Contains(pdb, "  name: gate-night-curfew\n") ||
		!strings.Contains(pdb, "      app.kubernetes.io/name: gate-night-curfew\n") {
		t.Errorf("pdb.yaml has no PodDisruptionBudget for gate-night-curfew:\n%s", pdb)
	}
	compose, err := composeNATSPasswords("x:\n"+natsPasswordsMarker, "compose.in.yaml", users)
	if err != nil || !strings.Contains(compose, "    WORLDGATE_NATS_GATE_NIGHT_CURFEW_PASSWORD: ${WORLDGATE_NATS_GATE_NIGHT_CURFEW_PASSWORD}\n") {
		t.Errorf("compose (%v):\n%s", err, compose)
	}
	env, err := dotEnv("A=1\n# @begin nats-passwords\nOLD=1\n# @end nats-passwords\nB=2\n", ".env", users)
	if err != nil || !strings.Contains(env, "WORLDGATE_NATS_GATE_NIGHT_CURFEW_PASSWORD=gate-night-curfew-dev-password\n") ||
		strings.Contains(env, "OLD=1") || !strings.HasPrefix(env, "A=1\n") || !strings.HasSuffix(env, "# @end nats-passwords\nB=2\n") {
		t.Errorf(".env (%v):\n%s", err, env)
	}
	kust, err := devOverlay("  # @begin nats-passwords\n  # @end nats-passwords\n  # @begin gate-keys\n  # @end gate-keys\n", "kustomization.yaml",
		k8sNATSUsers(users, specs, programs.All), specs)
	for _, want := range []string{"      - gate-night-curfew=gate-night-curfew-dev-password\n", "      - admin=admin-dev-password\n",
		"  - name: worldgate-gate-night-curfew-key\n    files:\n      - keys/night-curfew.key\n", "      - attest-keys/night-curfew.pub\n"} {
		if err != nil || !strings.Contains(kust, want) {
			t.Errorf("the dev overlay has no %q (%v):\n%s", want, err, kust)
		}
	}
	if strings.Contains(kust, "publisher=") {
		t.Errorf("the dev overlay's worldgate-nats holds a user no workload of the base refers to:\n%s", kust)
	}

	// Its development key pair: made once, kept afterwards.
	dev := t.TempDir()
	for _, d := range []string{"keys", "attest-keys"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	wrote, err := devGateKeys(dev, specs[len(specs)-1:])
	if err != nil || len(wrote) != 2 {
		t.Fatalf("devGateKeys wrote %v: %v", wrote, err)
	}
	key, _ := os.ReadFile(filepath.Join(dev, "keys/night-curfew.key"))
	if again, err := devGateKeys(dev, specs[len(specs)-1:]); err != nil || len(again) != 0 {
		t.Errorf("a second run wrote %v (%v); it keeps the key there", again, err)
	}
	if kept, _ := os.ReadFile(filepath.Join(dev, "keys/night-curfew.key")); !bytes.Equal(key, kept) {
		t.Error("a second run replaced the key")
	}
	private := t.TempDir()
	if err := os.WriteFile(filepath.Join(private, "night-curfew.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := attest.LoadSigner(private, "night-curfew")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := attest.LoadKeyring(filepath.Join(dev, "attest-keys"))
	if err != nil {
		t.Fatal(err)
	}
	if ids := ring.KeyIDs("night-curfew"); !slices.Equal(ids, []string{signer.KeyID()}) {
		t.Errorf("attest-keys/night-curfew.pub holds keys %v, want the private key's %s", ids, signer.KeyID())
	}
}

// copyPath copies a file or a directory of files.
func copyPath(t *testing.T, from, to string) {
	t.Helper()
	fi, err := os.Stat(from)
	if err != nil {
		t.Fatal(err)
	}
	if fi.IsDir() {
		if err := os.MkdirAll(to, 0o755); err != nil {
			t.Fatal(err)
		}
		es, err := os.ReadDir(from)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			copyPath(t, filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
		}
		return
	}
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
