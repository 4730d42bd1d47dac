package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/slowtest"
)

// The TypeScript client (clients/typescript, issue 40 item 4) against a fresh dev stack: its
// types are what openapi-typescript generates from edge's OpenAPI document today (no drift),
// it compiles with tsc --strict, and its tests under Node pass against edge — an NPC's answer
// through the long poll, a skipped move, an unknown event, a refused envelope naming its
// field, and the outcome stream resumed after a cursor.
func TestTypeScriptClientAgainstDev(t *testing.T) {
	slowtest.Skip(t, "end-to-end (the TypeScript client under tsc and Node against the dev stack)")
	client, err := filepath.Abs("../../clients/typescript")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(client, "node_modules/.bin/tsc")); err != nil {
		t.Fatal("clients/typescript's tools are not installed: run `npm ci` there (`make test` and .ci/run do)")
	}
	npm := func(timeout time.Duration, env []string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", args...)
		cmd.Dir, cmd.Env = client, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("npm %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	check := exec.Command("npm", "run", "--silent", "check-generated")
	check.Dir = client
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("clients/typescript/src/schema.ts is not what edge's OpenAPI document generates: run `npm run generate` there (%v)\n%s", err, out)
	}
	st := startQuietStack(t)
	out := npm(4*time.Minute, []string{"EDGE_URL=" + st.EdgeURL, "EDGE_KEY=" + st.EdgeKey}, "test")
	t.Log(out)
}
