// Package structuretest holds structural tests over the services' source: shapes the code must
// keep that no single package's tests can see.
package structuretest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every program reads the same connection flags: the NATS flag set (natsx.ConnConfig.RegisterFlags)
// and the graph flag set (graphx.Settings.RegisterFlags). A program that declares one of their
// flags by hand would drift (another name, another environment variable, no TLS).
func TestEveryProgramUsesTheConnectionFlagSets(t *testing.T) {
	names := []string{"nats-url", "nats-user", "nats-password", "nats-creds", "graph-url", "graph-user", "graph-username", "graph-password", "graph-ca-file"}
	var programs int
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "graphd" || d.Name() == "testdata") {
			return filepath.SkipDir // graphd is the graph server, not a client
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), "package main") {
			programs++
		}
		for _, n := range names {
			if strings.Contains(string(src), `"`+n+`"`) {
				t.Errorf("%s declares -%s by hand: use natsx.ConnConfig.RegisterFlags or graphx.Settings.RegisterFlags", path, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if programs < 8 {
		t.Fatalf("found %d program files under services: the walk is looking in the wrong place", programs)
	}
}
