package structuretest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every service's main is its constructor handed to service.Main (or service.MainMCP), a few
// lines: the wiring lives once, in the service's Start, which the in-process stack calls too
// (services/internal/service). graphd (the graph server) and worldgate (the CLI) are programs of
// another kind.
func TestEveryServiceMainIsItsConstructor(t *testing.T) {
	mains, err := filepath.Glob("../../*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	var checked int
	for _, path := range mains {
		name := filepath.Base(filepath.Dir(path))
		if name == "graphd" || name == "worldgate" {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		code := string(src)
		if i := strings.Index(code, "\npackage main"); i >= 0 {
			code = code[i:] // the program's documentation does not count
		}
		if !strings.Contains(code, "service.Main(") && !strings.Contains(code, "service.MainMCP(") {
			t.Errorf("services/%s/main.go does not hand its service to service.Main or service.MainMCP: wire it in its package's Start", name)
		}
		if n := strings.Count(code, "\n"); n > 30 {
			t.Errorf("services/%s/main.go has %d lines of code: its wiring belongs in its package's Start, which the stack uses too", name, n)
		}
	}
	if checked < 9 {
		t.Fatalf("checked %d service mains: the glob is looking in the wrong place", checked)
	}
}
