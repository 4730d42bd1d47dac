package deploy

import (
	"path/filepath"
	"testing"
)

// Every program under services/ (a directory with a main.go: the list services/worldgate/programs
// keeps for the harnesses) is one of the deployed programs checked here, so a new service fails
// until its image, flags and documentation are in place.
func TestEveryProgramIsDeployed(t *testing.T) {
	mains, err := filepath.Glob(filepath.Join(repoRoot, "services", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(mains) < 8 {
		t.Fatalf("found %d programs under services: the glob is looking in the wrong place", len(mains))
	}
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(m))
		if _, ok := programNamed(name); !ok {
			t.Errorf("services/%s is a program missing from deploy's programs (services_test.go): its image, compose service, manifests and docs/configuration.md section", name)
		}
	}
}
