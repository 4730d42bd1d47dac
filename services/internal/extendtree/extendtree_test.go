// Package extendtree proves docs/extending.md: it copies the repository into a temporary
// directory, adds a proposal kind, an agent role and a gate there exactly as the guide says
// (the files it names, the generators it names), builds and vets every module of the copy,
// runs the structural checks the guide names, and compares the files each extension touched,
// by hand and generated, with the count the guide states ("Files: N by hand, M generated").
package extendtree

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/slowtest"
)

// An extension is one section of docs/extending.md: the edits it names by hand, then the
// generators it names.
type extension struct {
	section  string // the guide's heading, "## A gate"
	hand     func(t *testing.T, tree string)
	generate [][]string // each: the directory (relative to the tree), then the command
}

func TestGuideExtensionsBuildAndPassTheStructuralChecks(t *testing.T) {
	slowtest.Skip(t, "end-to-end (copies the repository, extends it as docs/extending.md says, builds and checks every module of the copy)")
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	tsgen := filepath.Join(root, "clients/typescript/node_modules/.bin/openapi-typescript")
	if _, err := os.Stat(tsgen); err != nil {
		t.Fatal("clients/typescript's tools are not installed: run `npm ci` there (`make test` and .ci/run do); a new kind regenerates the TypeScript client")
	}
	tree := t.TempDir()
	if keep := os.Getenv("WORLDGATE_EXTENDTREE_KEEP"); keep != "" { // a directory to keep the copy in, to look at
		if tree, err = os.MkdirTemp(keep, "extendtree-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("the copy: %s", tree)
	}
	copyTree(t, root, tree)
	// node_modules is not in the repository: the copy's TypeScript client uses the original's.
	if err := os.Symlink(filepath.Join(root, "clients/typescript/node_modules"), filepath.Join(tree, "clients/typescript/node_modules")); err != nil {
		t.Fatal(err)
	}
	run(t, tree, "git", "init", "-q")
	commitAll(t, tree, "the repository")
	// The guide as it is in the working tree: the counts it states are checked before it is
	// committed.
	guide := string(readFile(t, root, "docs/extending.md"))

	policyGen := []string{"services/worldgate/policy", "go", "generate"}
	deployGen := []string{"deploy", "go", "test", "-count=1", "-run", "TestConfigurationReference|TestTemplatesFile", "-update", "."}
	for _, ext := range []extension{
		{section: "## A proposal kind", hand: addKind,
			generate: [][]string{{"services/edge/edge", "go", "generate"}, {"clients/typescript", "npm", "run", "--silent", "generate"}}},
		{section: "## An agent role", hand: addRole, generate: [][]string{policyGen, deployGen}},
		{section: "## A gate", hand: addGate, generate: [][]string{policyGen, deployGen}},
	} {
		ext.hand(t, tree)
		byHand := changed(t, tree)
		gofmt := []string{"-w"} // as an editor does on save
		for _, f := range byHand {
			if strings.HasSuffix(f, ".go") {
				gofmt = append(gofmt, f)
			}
		}
		if len(gofmt) > 1 {
			run(t, tree, "gofmt", gofmt...)
		}
		for _, g := range ext.generate {
			run(t, filepath.Join(tree, g[0]), g[1], g[2:]...)
		}
		var generated []string
		for _, f := range changed(t, tree) {
			if !slices.Contains(byHand, f) {
				generated = append(generated, f)
			}
		}
		t.Logf("%s: by hand %v; generated %v", ext.section, byHand, generated)
		want := fmt.Sprintf("Files: %d by hand, %d generated", len(byHand), len(generated))
		if got := filesLine(t, guide, ext.section); got != want {
			t.Errorf("docs/extending.md %q says %q; following it touched %q (by hand %v, generated %v)", ext.section, got, want, byHand, generated)
		}
		commitAll(t, tree, ext.section)
	}

	// Every module builds and is formatted. (Not vetted again: make test vets the tree, and the
	// copy differs by the guide's few edits, which the build and the checks below compile.)
	mods := modules(t, tree)
	for _, m := range mods {
		run(t, filepath.Join(tree, m), "go", "build", "./...")
	}
	if out := output(t, tree, "gofmt", append([]string{"-l"}, mods...)...); len(out) > 0 {
		t.Errorf("gofmt would change:\n%s", out)
	}
	// The structural checks the guide names, and those that pin the generated files.
	check(t, filepath.Join(tree, "events"), "go", "test", "-count=1", "-run",
		"TestEveryKindHasEachPart|TestWorldBuildingEmittersProposeTheWorldBuildingKinds|TestDefaultRoutes", "./", "./route")
	check(t, filepath.Join(tree, "services"), "go", "test", "-count=1", "-run",
		"TestRegistryShape|TestATestOnlyGateRunsLikeTheOthers|TestEveryProgramIsListed|TestEveryServiceConfigRendersWhatItParses|"+
			"TestK8sGatesWritesTheCommittedFiles|TestNATSConfigWritesTheCommittedFiles|TestRolesAreConsistent|TestOutputSchemasMatchTheContract|"+
			"TestListAndRegistry|TestEveryKindHasAMapping|TestOpenAPIIsGenerated|TestCommittedConfigurationIsUpToDate|TestGeneratedConfigurationLoadsIntoTheSameUsers|"+
			"TestAIWorkerProposesOnlyOnItsRolesEmitterSubjects|TestEachGatePublishesOnlyToItsNextHops|TestWorldLoaderOnlyProposesWorldBuilding|TestNoServiceImportsAnother|TestEveryServiceMainIsItsConstructor|TestDeployManifestsWriteTheCommittedFiles",
		"./gate/gates", "./gate/extendtest", "./worldgate/programs", "./worldgate", "./worldgate/policy",
		"./ai-worker/roles", "./ai-worker/templates", "./event-processor/apply", "./edge/edge", "./internal/structuretest")
	check(t, filepath.Join(tree, "deploy"), "go", "test", "-count=1", "-run",
		"TestKubernetes|TestCompose|TestTemplatesFile|TestConfigurationReference|TestFlagsAreRead|TestEveryProgramIsDeployed", ".")
	// Nothing the checks ran rewrote a file: the generators had written them all.
	if c := changed(t, tree); len(c) > 0 {
		t.Errorf("the checks changed %v", c)
	}
}

// ---- the three extensions, in the guide's words ----

// addKind adds weather_set, a world-building kind: a location's weather.
func addKind(t *testing.T, tree string) {
	// 1. events/proposal.go: the Kind… constant.
	insertAfter(t, tree, "events/proposal.go", "	KindLoreFactAdded   = \"lore_fact_added\"\n",
		"	KindWeatherSet = \"weather_set\"\n")
	// 2. events/kinds.go: its payload type and its KindInfo line.
	insertAfter(t, tree, "events/kinds.go", "var kinds = []KindInfo{\n",
		"	{Kind: KindWeatherSet, DomainType: \"WeatherSet\", PlayerText: true, WorldBuilding: true, New: func() Payload { return new(WeatherSetPayload) }},\n")
	appendTo(t, tree, "events/kinds.go", `
// WeatherSetPayload sets the weather at a location.
type WeatherSetPayload struct {
	LocationID string `+"`json:\"locationId\"`"+`
	Weather    string `+"`json:\"weather\" validate:\"notblank\"`"+`
}

func (p *WeatherSetPayload) Content() string      { return lines(p.Weather) }
func (p *WeatherSetPayload) Target() string       { return p.LocationID }
func (p *WeatherSetPayload) References() []string { return ids(p.LocationID) }
func (p *WeatherSetPayload) Creates() string      { return "" }
`)
	// 3. schemas/v1/proposals/<kind>.json.
	writeFile(t, tree, "schemas/v1/proposals/weather_set.json", `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://worldgate.dev/schemas/v1/proposals/weather_set.json",
  "title": "weather_set proposal payload",
  "type": "object",
  "additionalProperties": false,
  "required": ["locationId", "weather"],
  "properties": {
    "locationId": {"$ref": "../ids.json#/$defs/location"},
    "weather": {"type": "string", "minLength": 1, "maxLength": 200}
  }
}
`)
	// 4. services/event-processor/apply/kinds.go: its mapper in mappers.
	insertAfter(t, tree, "services/event-processor/apply/kinds.go", "var mappers = map[string]mapper{\n",
		"	events.KindWeatherSet: weatherSet,\n")
	appendTo(t, tree, "services/event-processor/apply/kinds.go", `
func weatherSet(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.WeatherSetPayload](p)
	if err != nil {
		return err
	}
	c.requireVertex("Location", v.LocationID, "location")
	id := AnswerID("wth:", p)
	c.write(createVertex(id, "Weather", props{"weather": v.Weather, "proposalId": p.ProposalID, "createdUtc": utc(p)}, nil))
	c.write(edge(id, "covers", v.LocationID, nil))
	return nil
}
`)
	// Plus its route in routes.yaml.
	insertAfter(t, tree, "events/route/routes.yaml", "routes:\n", "  weather_set: [schema, safety, invariant, audit]\n")
}

// addRole adds town-crier, an LLM role: on a player's arrival it proposes ambience with a
// template of its own.
func addRole(t *testing.T, tree string) {
	// 1. services/ai-worker/roles/roles.go: a Role in all.
	insertAfter(t, tree, "services/ai-worker/roles/roles.go", "var all = []Role{\n", `	{
		Name: "town-crier", Trigger: events.PlayerMoved, Kind: events.KindAmbience,
		Purpose: PurposeAmbience, Template: "town-crier", UsesLLM: true,
		Tools:    []string{"get-location"},
		Required: []string{"get-location"},
	},
`)
	// 2. services/ai-worker/templates/templates.go: its prompt template.
	insertAfter(t, tree, "services/ai-worker/templates/templates.go", "var specs = []Spec{\n",
		"	{Template: describe(prompt.MustNew(\"town-crier\", \"1.0.0\", townCrierText), \"The town crier's news on arrival (cheap tier).\"),\n"+
			"		Kind: events.KindAmbience, Temperature: 0.7, Seed: 1, MaxTokens: 400},\n")
	appendTo(t, tree, "services/ai-worker/templates/templates.go", "\nconst townCrierText = `You are the town crier of a location in a fantasy world: announce, in two sentences, what\n"+
		"a player arriving there hears. Look the location up with get-location; never invent people or places.\n"+
		"Answer with one JSON object with the fields locationId (the location id given below), text and mood.\n` + common\n")
	// 3. events/emitters.go: the role as an emitter and the kinds it may propose.
	insertAfter(t, tree, "events/emitters.go", "const (\n", "	EmitterTownCrier = \"town-crier\" // ai-worker agent role\n")
	insertAfter(t, tree, "events/emitters.go", "var emitterKinds = map[string][]string{\n", "	EmitterTownCrier: {KindAmbience},\n")
	replace(t, tree, "events/emitters.go", "return []string{EmitterAmbience,", "return []string{EmitterTownCrier, EmitterAmbience,")
}

// addGate adds night-curfew: nobody moves into the vault.
func addGate(t *testing.T, tree string) {
	// 1. services/gate/gates/<name>.go: the gate, its name constant and its Spec.
	writeFile(t, tree, "services/gate/gates/night_curfew.go", `package gates

import (
	"context"
	"encoding/json"

	"github.com/worldgate/worldgate/events"
)

// NightCurfew is the night-curfew gate's name.
const NightCurfew = "night-curfew"

var nightCurfewGate = Spec{
	Name: NightCurfew, Summary: "nobody enters the vault at night",
	New: func(context.Context, Deps) (Gate, error) { return nightCurfew{}, nil },
}

// nightCurfew refuses a move into the vault.
type nightCurfew struct{}

func (nightCurfew) Name() string { return NightCurfew }

func (nightCurfew) Check(_ context.Context, p *events.Proposal) (Decision, error) {
	var m events.PlayerMovedPayload
	if err := json.Unmarshal(p.Payload, &m); err != nil {
		return Reject(events.CodeSchemaInvalid, "The move cannot be read: "+err.Error(), nil), nil
	}
	if m.ToLocationID == "loc:vault" {
		return Reject(events.CodeInvariantViolation, "The vault is closed at night: nobody may enter it.", map[string]any{"location": m.ToLocationID}), nil
	}
	return Pass(), nil
}
`)
	// 2. One registration line: the Spec in builtin.
	replace(t, tree, "services/gate/gates/registry.go", "approvalGate, auditGate}", "approvalGate, nightCurfewGate, auditGate}")
	// 3. Its place in routes.yaml.
	replace(t, tree, "events/route/routes.yaml", "  player_moved:    [schema, invariant, rate, audit]", "  player_moved:    [schema, invariant, night-curfew, rate, audit]")
	// Nothing by hand in the deployment: the generators write its NATS user, its Kubernetes
	// manifests, its PodDisruptionBudget, its NATS password in compose and its development
	// Secrets and key pair in the dev overlay.
}

// NightCurfew is the generated gate's name: dashed, as a gate's name may be.
const NightCurfew = "night-curfew"

// ---- the guide ----

var filesRE = regexp.MustCompile(`Files: [0-9]+ by hand, [0-9]+ generated`)

// filesLine is the "Files: N by hand, M generated" line of the guide's section.
func filesLine(t *testing.T, guide, section string) string {
	t.Helper()
	i := strings.Index(guide, "\n"+section+"\n")
	if i < 0 {
		t.Fatalf("docs/extending.md has no section %q", section)
	}
	body := guide[i+len(section)+2:]
	if j := strings.Index(body, "\n## "); j >= 0 {
		body = body[:j]
	}
	return filesRE.FindString(body)
}

// ---- the copy ----

// copyTree copies the repository's committed tree (HEAD, the files `git ls-files` lists as
// committed) into dst: what others change in the working tree meanwhile is not part of it.
func copyTree(t *testing.T, root, dst string) {
	t.Helper()
	archive := command(root, "git", "archive", "--format=tar", "HEAD")
	extract := command(dst, "tar", "-x")
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	extract.Stdin = pipe
	if err := archive.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := extract.CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v\n%s", err, out)
	}
	if err := archive.Wait(); err != nil {
		t.Fatalf("git archive HEAD: %v", err)
	}
}

// modules are the tree's Go modules: go.work's, and deploy (a workspace of its own).
func modules(t *testing.T, tree string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\s+\./(\S+)$`).FindAllStringSubmatch(string(readFile(t, tree, "go.work")), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatal("go.work uses no modules")
	}
	return append(out, "deploy")
}

// changed lists the files changed, added or removed since the last commit of the tree.
func changed(t *testing.T, tree string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(string(output(t, tree, "git", "status", "--porcelain", "-uall", "--no-renames")), "\n") {
		if len(l) > 3 {
			out = append(out, l[3:])
		}
	}
	return out
}

func commitAll(t *testing.T, tree, msg string) {
	t.Helper()
	run(t, tree, "git", "add", "-A")
	run(t, tree, "git", "-c", "user.name=extendtree", "-c", "user.email=extendtree@invalid", "commit", "-q", "--allow-empty", "-m", msg)
}

// ---- edits ----

func readFile(t *testing.T, tree, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tree, f))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, tree, f, s string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(tree, f), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace replaces the one occurrence of old in f; the guide's anchor must be there once.
func replace(t *testing.T, tree, f, old, new string) {
	t.Helper()
	s := string(readFile(t, tree, f))
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("%s: %q occurs %d times, want once (the guide's instructions no longer fit the file?)", f, old, n)
	}
	writeFile(t, tree, f, strings.Replace(s, old, new, 1))
}

func insertAfter(t *testing.T, tree, f, anchor, text string) {
	t.Helper()
	replace(t, tree, f, anchor, anchor+text)
}

func appendTo(t *testing.T, tree, f, text string) {
	t.Helper()
	writeFile(t, tree, f, string(readFile(t, tree, f))+text)
}

// ---- commands ----

// command runs name in dir with the workspace of dir (never the caller's GOWORK) and a
// deadline of its own.
func command(dir, name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GOWORK=", "GOFLAGS=")
	c.WaitDelay = time.Minute
	return c
}

// run runs a step the rest depends on: its failure stops the test.
func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	if !check(t, dir, name, args...) {
		t.FailNow()
	}
}

// check runs a check: its failure fails the test, and the other checks still run.
func check(t *testing.T, dir, name string, args ...string) bool {
	t.Helper()
	start := time.Now()
	out, err := command(dir, name, args...).CombinedOutput()
	t.Logf("%s: %s %s (%s)", dir, name, strings.Join(args, " "), time.Since(start).Round(time.Second))
	if err != nil {
		t.Errorf("%s: %s %s: %v\n%s", dir, name, strings.Join(args, " "), err, out)
		return false
	}
	return true
}

func output(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	out, err := command(dir, name, args...).Output()
	if err != nil {
		t.Fatalf("%s: %s %s: %v", dir, name, strings.Join(args, " "), err)
	}
	return out
}
