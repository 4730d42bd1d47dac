package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/services/worldgate/programs"
)

// `worldgate deploy-manifests` writes the committed compose file and what is committed in
// deploy/kubernetes/base/services, and nothing else is there: a service's deployments come
// from the list of programs only.
func TestDeployManifestsWriteTheCommittedFiles(t *testing.T) {
	dir := t.TempDir()
	compose := filepath.Join(dir, "compose.yaml")
	k8s := filepath.Join(dir, "services")
	const root = "../../deploy"
	err := runDeployManifests(context.Background(), []string{"-compose-template", root + "/compose/compose.in.yaml",
		"-compose", compose, "-k8s", k8s}, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	const regenerate = "run `go generate ./services/worldgate/policy`"
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
