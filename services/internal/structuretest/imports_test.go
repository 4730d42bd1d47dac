package structuretest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const servicesPath = "github.com/worldgate/worldgate/services/"

// crossServiceExceptions are the imports of another service's package that production code
// still makes outside the composition root, each with the reason it is allowed for now. Every
// entry is "<importing service>/... -> <imported package>".
var crossServiceExceptions = map[string]string{
	// The interaction memory's store (the KV records memory-writer writes and get-recent-dialogue
	// reads) is still the memory-writer's package: the next contract to move below the services.
	"mcp-world -> memory-writer/memory": "the memory store, still the memory-writer's",
}

// No service imports another service's package: what two services share lives below them (the
// events module, shared). Only the composition root, the worldgate CLI (services/worldgate and
// its packages), builds programs out of several services. services/internal is the services'
// own shared test tooling. Test files may still import a neighbour (its test harness, or the
// real neighbour an end-to-end test runs); this test reads only the code programs link.
func TestNoServiceImportsAnotherService(t *testing.T) {
	fset := token.NewFileSet()
	var files int
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel("../..", path)
		if err != nil {
			return err
		}
		own, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if own == "worldgate" || own == "internal" || !strings.Contains(filepath.ToSlash(rel), "/") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil || !strings.HasPrefix(p, servicesPath) {
				continue
			}
			pkg := strings.TrimPrefix(p, servicesPath)
			other, _, _ := strings.Cut(pkg, "/")
			if other == own || other == "internal" {
				continue
			}
			if _, ok := crossServiceExceptions[own+" -> "+pkg]; ok {
				continue
			}
			t.Errorf("%s imports %s, another service's package: move what the two share below the services (a package of the events module, or of shared), or the composition into services/worldgate", rel, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read %d files under services: the walk is looking in the wrong place", files)
	}
}
