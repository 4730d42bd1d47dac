package slowtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// childEnv makes the test binary run a child: a test that calls Skip.
const childEnv = "WORLDGATE_SLOWTEST_CHILD"

func TestSkipUnderShortOnly(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		Skip(t, "end-to-end (a test of Skip)")
		t.Log("ran")
		return
	}
	for _, short := range []bool{true, false} {
		args := []string{"-test.run=^TestSkipUnderShortOnly$", "-test.v"}
		if short {
			args = append(args, "-test.short")
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), childEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("short=%v: %v\n%s", short, err, out)
		}
		skipped := strings.Contains(string(out), "--- SKIP") &&
			strings.Contains(string(out), "end-to-end (a test of Skip): make test runs it")
		ran := strings.Contains(string(out), "ran")
		if skipped != short || ran == short {
			t.Errorf("short=%v: skipped %v, ran %v\n%s", short, skipped, ran, out)
		}
	}
}
