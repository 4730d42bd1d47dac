package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runDemoOnly runs `worldgate dev --demo-only --json` in-process on free ports and returns
// the summary it prints as its last line.
func runDemoOnly(t *testing.T, dir string) Summary {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := []string{"-data-dir", dir, "-demo-only", "-json", "-nats-port", "0", "-graph-port", "0", "-admin-port", "0", "-mcp-port", "0"}
	if err := runDev(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("dev: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var s Summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("last line is not the JSON summary: %v\n%s", err, stdout.String())
	}
	return s
}

func TestDevDemoOnlyPrintsSummaryAndEndpoints(t *testing.T) {
	dir := t.TempDir()
	s := runDemoOnly(t, dir)
	if s.Events == 0 {
		t.Fatalf("summary counts no events: %+v", s)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "endpoints.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ep map[string]any
	if err := json.Unmarshal(raw, &ep); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"nats.url", "graph.url", "metrics.url"} {
		if ep[k] == nil {
			t.Errorf("endpoints.json lacks %s: %s", k, raw)
		}
	}
	// A second run on the same data directory counts only its own events.
	if again := runDemoOnly(t, dir); again.Events != s.Events {
		t.Fatalf("second run counted %d events, first %d", again.Events, s.Events)
	}
}
