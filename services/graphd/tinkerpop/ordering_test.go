package tinkerpop_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// orderingScenario selects the scenarios whose answer depends on an order:
// the orderability semantics and every traversal with order(), except
// Order.shuffle's (random by definition; their results are unordered).
func orderingScenario(folder, file, name, text string) bool {
	if strings.Contains(text, "Order.shuffle") {
		return false
	}
	return file == "Orderability.feature" || strings.Contains(text, "order(")
}

// TestOrderingAcrossProcesses runs the ordering scenarios in two fresh
// processes (each with its own graphds) and requires identical results, so
// no order depends on heap addresses, map iteration or timing.
func TestOrderingAcrossProcesses(t *testing.T) {
	suiteDir(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var dumps [2][]byte
	for i := range dumps {
		path := filepath.Join(t.TempDir(), "dump.txt")
		cmd := exec.Command(exe, "-test.run", "^TestTinkerPopSuite$", "-test.count", "1")
		cmd.Env = append(os.Environ(), "GRAPHD_TCK_DUMP="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("process %d: %v\n%s", i+1, err, out)
		}
		if dumps[i], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	a, b := strings.Split(string(dumps[0]), "\n"), strings.Split(string(dumps[1]), "\n")
	if len(a) < 50 {
		t.Fatalf("only %d ordering scenarios ran", len(a))
	}
	if len(a) != len(b) {
		t.Fatalf("the two processes ran %d and %d ordering scenarios", len(a), len(b))
	}
	diff := 0
	for i := range a {
		if a[i] != b[i] {
			diff++
			t.Errorf("results differ between processes:\n  1: %s\n  2: %s", a[i], b[i])
		}
	}
	if !bytes.Equal(dumps[0], dumps[1]) && diff == 0 {
		t.Error("dumps differ")
	}
	t.Logf("%d ordering scenarios gave the same results in two processes", len(a)-1)
}
