package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// parentEnv makes the test binary a harness that starts one process and prints its PID
// (TestAStackDiesWithItsHarness).
const parentEnv = "WORLDGATE_TEST_HARNESS_PARENT"

func TestMain(m *testing.M) {
	if os.Getenv(parentEnv) != "" {
		p := &Proc{Name: "sleeper", bin: "/bin/sleep", args: []string{"300"}, logW: io.Discard}
		if err := p.start(); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(p.PID())
		select {} // until killed
	}
	os.Exit(m.Run())
}

// A process the harness started dies with the harness: a killed bench or chaos, or a test binary
// past its timeout, leaves no stack behind to burn the machine.
func TestAStackDiesWithItsHarness(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), parentEnv+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the harness printed no PID: %v", err)
	}
	pid, err := strconv.Atoi(line[:len(line)-1])
	if err != nil {
		t.Fatalf("the harness printed %q", line)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the started process %d is not running: %v", pid, err)
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; {
		// Gone, or a zombie whose parent (now init) has not reaped it yet: either way, dead.
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || len(b) > 0 && zombie(string(b)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs 10 s after its harness was killed", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// zombie reports whether a /proc/<pid>/stat line is of a process that has exited.
func zombie(stat string) bool {
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' {
			return i+2 < len(stat) && stat[i+2] == 'Z'
		}
	}
	return false
}
