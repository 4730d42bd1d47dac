package main

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/services/worldgate/worldfile"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/slowtest"
)

// TestMain lets the test binary stand in for the worldgate command: the guide's shell blocks
// call `worldgate`, and a wrapper on their PATH runs this binary with WORLDGATE_TEST_AS_CLI set.
func TestMain(m *testing.M) {
	if os.Getenv("WORLDGATE_TEST_AS_CLI") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// guideBlock is one fenced code block of a page.
type guideBlock struct {
	lang, code string
	line       int
}

var fence = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```$")

func guideBlocks(t *testing.T, page string) []guideBlock {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []guideBlock
	for _, m := range fence.FindAllSubmatchIndex(raw, -1) {
		out = append(out, guideBlock{lang: string(raw[m[2]:m[3]]), code: string(raw[m[4]:m[5]]),
			line: bytes.Count(raw[:m[0]], []byte("\n")) + 1})
	}
	return out
}

// outcomeLine is what each block that publishes prints for its event's outcome: each of the
// page's events gets content for its player (the curl block's names the world the page loads).
var outcomeLine = regexp.MustCompile(`(?m)^(committed|fallback|reused): \S.*$`)

// The game team's page runs (issue 40 item 1): every block of docs/integrate.md, in order,
// against a fresh dev stack — the world file is parsed and loaded, the shell blocks run in
// bash with `worldgate` on the PATH, the Go block is built as a module of its own with the
// replace lines the page gives, the TypeScript block is compiled with tsc --strict and run
// under Node — and each block that publishes prints its event's outcome.
func TestIntegrateGuideAgainstDev(t *testing.T) {
	slowtest.Skip(t, "end-to-end (docs/integrate.md against the dev stack: bash, go build, tsc and Node)")
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tsc := filepath.Join(repo, "clients/typescript/node_modules/.bin/tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Fatal("TypeScript is not installed: run `npm ci` in clients/typescript (`make test` and .ci/run do)")
	}
	for _, tool := range []string{"bash", "curl", "jq", "node", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed; the guide needs it", tool)
		}
	}
	blocks := guideBlocks(t, filepath.Join(repo, "docs/integrate.md"))
	if len(blocks) == 0 || blocks[0].lang != "sh" || strings.TrimSpace(blocks[0].code) != "make run" {
		t.Fatal("docs/integrate.md no longer starts with a `make run` block, which this test stands for by starting the dev stack")
	}

	root := t.TempDir()
	logOut, err := os.Create(filepath.Join(root, "worldgate.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logOut.Close() })
	st, err := startStack(context.Background(), devFlags{dataDir: filepath.Join(root, ".worldgate"), host: "127.0.0.1", noDemo: true},
		logx.New(logOut, "worldgate-dev", "info"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.stop)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	wrapper := fmt.Sprintf("#!/bin/sh\nWORLDGATE_TEST_AS_CLI=1 exec %s \"$@\"\n", strconv.Quote(self))
	if err := os.WriteFile(filepath.Join(bin, "worldgate"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	run := func(b guideBlock, dir string, timeout time.Duration, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docs/integrate.md:%d (%s): %s %v: %v\n%s", b.line, b.lang, name, args, err, out)
		}
		return string(out)
	}
	published := 0
	for _, b := range blocks[1:] {
		var out string
		switch b.lang {
		case "yaml":
			first, _, _ := strings.Cut(b.code, "\n")
			name, ok := strings.CutPrefix(first, "# ")
			if !ok || !strings.HasSuffix(name, ".yaml") {
				t.Fatalf("docs/integrate.md:%d: a world file block starts with its file name (# NAME.yaml)", b.line)
			}
			if _, err := worldfile.Parse(name, []byte(b.code)); err != nil {
				t.Fatalf("docs/integrate.md:%d: %v", b.line, err)
			}
			if err := os.WriteFile(filepath.Join(root, name), []byte(b.code), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		case "sh":
			out = run(b, root, 3*time.Minute, "bash", "-euo", "pipefail", "-c", b.code)
		case "go":
			out = runGuideGo(t, b, repo, root, run)
		case "ts":
			out = runGuideTS(t, b, repo, root, tsc, run)
		default:
			t.Fatalf("docs/integrate.md:%d: a %q block, which this test does not know how to run", b.line, b.lang)
		}
		t.Logf("docs/integrate.md:%d (%s):\n%s", b.line, b.lang, out)
		if b.lang != "sh" || strings.Contains(b.code, "/v1/events") { // the Go and TypeScript blocks are whole programs that publish
			published++
			if !outcomeLine.MatchString(out) {
				t.Errorf("docs/integrate.md:%d (%s) published an event but printed no content for its player:\n%s", b.line, b.lang, out)
			}
		}
	}
	if published < 3 {
		t.Errorf("%d blocks publish and print an outcome; want curl, Go and TypeScript", published)
	}
}

// runGuideGo builds the page's Go program as a game team would: a module of its own that
// requires the events module through replace lines, built outside the workspace.
func runGuideGo(t *testing.T, b guideBlock, repo, root string, run func(guideBlock, string, time.Duration, string, ...string) string) string {
	t.Helper()
	dir := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(repo, "events/go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	eventsMod, err := os.ReadFile(filepath.Join(repo, "events/go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(eventsMod) // the events module's own
	mod := fmt.Sprintf("module example.com/game\n\n%s\n\nrequire github.com/worldgate/worldgate/events v0.0.0\n\n"+
		"replace github.com/worldgate/worldgate/events => %s\n\nreplace github.com/worldgate/worldgate/schemas => %s\n",
		goLine, filepath.Join(repo, "events"), filepath.Join(repo, "schemas"))
	for name, data := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "main.go": []byte(b.code)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(dir, "game")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", exe, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docs/integrate.md:%d (go): go build: %v\n%s", b.line, err, out)
	}
	return run(b, root, 2*time.Minute, exe)
}

// runGuideTS builds the TypeScript client, installs it as the page says (a package named
// @worldgate/edge in node_modules), compiles the page's TypeScript with tsc --strict and runs it
// under Node.
func runGuideTS(t *testing.T, b guideBlock, repo, root, tsc string, run func(guideBlock, string, time.Duration, string, ...string) string) string {
	t.Helper()
	client := filepath.Join(repo, "clients/typescript")
	run(b, client, 2*time.Minute, tsc, "-p", "tsconfig.json")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "node_modules/@worldgate"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(client, filepath.Join(dir, "node_modules/@worldgate/edge")); err != nil {
		t.Fatal(err)
	}
	tsconfig := fmt.Sprintf(`{"compilerOptions": {"strict": true, "target": "es2022", "module": "nodenext", "moduleResolution": "nodenext",
  "lib": ["es2022", "dom"], "typeRoots": [%q], "types": ["node"], "outDir": "out"}, "files": ["guide.ts"]}`,
		filepath.Join(client, "node_modules/@types"))
	for name, data := range map[string]string{"package.json": `{"type": "module"}`, "tsconfig.json": tsconfig, "guide.ts": b.code} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(b, dir, 2*time.Minute, tsc, "-p", "tsconfig.json", "--strict")
	return run(b, root, 2*time.Minute, "node", filepath.Join(dir, "out/guide.js"))
}

// The page's table of which event triggers which role and outcome is the code's: each agent
// role's trigger, name and proposal kind (roles.All), fallback and reused for the roles that ask a model,
// and skipped with the code of each SkippedOutcome the ai-worker's agent can return for the
// role's proposal kind.
func TestIntegrateGuideTableMatchesTheRoles(t *testing.T) {
	page, err := os.ReadFile("../../docs/integrate.md")
	if err != nil {
		t.Fatal(err)
	}
	skips := skipCodesByKind(t)
	var rows [][]string
	inTable := false
	for line := range strings.SplitSeq(string(page), "\n") {
		if strings.HasPrefix(line, "| event type | agent role | proposal kind | outcomes | skipped when |") {
			inTable = true
			continue
		}
		if inTable && strings.HasPrefix(line, "| ---") {
			continue
		}
		if inTable && !strings.HasPrefix(line, "|") {
			break
		}
		if inTable {
			var cells []string
			for c := range strings.SplitSeq(strings.Trim(line, "|"), "|") {
				cells = append(cells, strings.TrimSpace(c))
			}
			rows = append(rows, cells)
		}
	}
	all := roles.All()
	if len(rows) != len(all) {
		t.Fatalf("docs/integrate.md's table has %d rows, the ai-worker has %d agent roles", len(rows), len(all))
	}
	unquote := func(s string) string { return strings.Trim(s, "`") }
	for i, r := range all {
		row := rows[i]
		if len(row) != 5 {
			t.Fatalf("row %d: %v", i+1, row)
		}
		if unquote(row[0]) != r.Trigger || unquote(row[1]) != r.Name || unquote(row[2]) != r.Kind {
			t.Errorf("row %d reads %v; the role is %s triggered by %s proposing %s", i+1, row[:3], r.Name, r.Trigger, r.Kind)
		}
		want := []string{"committed"}
		if r.UsesLLM { // fallback content and reuse exist for the model's answers only
			want = append(want, "fallback", "reused")
		}
		want = append(want, "refused")
		if len(skips[r.Kind]) > 0 {
			want = append(want, "skipped")
		}
		if got := strings.Split(row[3], ", "); !slices.Equal(got, want) {
			t.Errorf("row %d (%s): outcomes %v, want %v", i+1, r.Name, got, want)
		}
		for _, code := range skips[r.Kind] {
			if !strings.Contains(row[4], "`"+code+"`") {
				t.Errorf("row %d (%s): skipped when %q does not name %s", i+1, r.Name, row[4], code)
			}
		}
		if len(skips[r.Kind]) == 0 && row[4] != "—" {
			t.Errorf("row %d (%s): skipped when %q, but the role never skips", i+1, r.Name, row[4])
		}
	}
}

// skipCodesByKind reads the ai-worker's agent source: for each events.SkippedOutcome call, the
// code it passes and the proposal kind of the `role.Kind == events.KindX` condition around it,
// both resolved through the events package's constants.
func skipCodesByKind(t *testing.T) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	consts := map[string]string{}
	parseDir := func(dir string) []*ast.File {
		matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		var files []*ast.File
		for _, m := range matches {
			if strings.HasSuffix(m, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, m, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		return files
	}
	for _, f := range parseDir("../../events") {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[n.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		}
	}
	eventsConst := func(e ast.Expr) string {
		if sel, ok := e.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "events" {
				return consts[sel.Sel.Name]
			}
		}
		return ""
	}
	out := map[string][]string{}
	found := 0
	for _, f := range parseDir("../ai-worker/agent") {
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "SkippedOutcome" || len(call.Args) < 4 {
				return true
			}
			found++
			code := eventsConst(call.Args[3])
			kind := ""
			for i := len(stack) - 1; i >= 0 && kind == ""; i-- {
				if is, ok := stack[i].(*ast.IfStmt); ok {
					if be, ok := is.Cond.(*ast.BinaryExpr); ok && be.Op == token.EQL {
						if s, ok := be.X.(*ast.SelectorExpr); ok && s.Sel.Name == "Kind" {
							kind = eventsConst(be.Y)
						}
					}
				}
			}
			if code == "" || kind == "" {
				t.Fatalf("%s: a SkippedOutcome whose code or proposal kind this test cannot read (an events constant, inside `if role.Kind == events.KindX`)", fset.Position(call.Pos()))
			}
			out[kind] = append(out[kind], code)
			return true
		})
	}
	if found == 0 {
		t.Fatal("no events.SkippedOutcome call in services/ai-worker/agent: has skipping moved?")
	}
	return out
}
