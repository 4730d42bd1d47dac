package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/slowtest"
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

// The process stack runs as many event-processor replicas as asked, each its own process with its
// own admin address, each ready, each with its CPU read by name; and the memory-writer, when
// asked, ready on the argv its Config renders.
func TestProcessorReplicas(t *testing.T) {
	slowtest.Skip(t, "end-to-end (the process stack with two event-processor replicas)")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	binDir := DefaultBinDir()
	if err := Build(ctx, binDir); err != nil {
		t.Fatal(err)
	}
	ps, err := StartProcs(ctx, ProcsOptions{BinDir: binDir, DataDir: t.TempDir(), NATSNodes: 1, Processors: 2, MemoryWriter: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Stop()
	if mw := ps.Lookup("memory-writer"); mw == nil || mw.Admin == "" {
		t.Errorf("memory-writer: %+v, want a process with an admin address", mw)
	}
	replicas := ps.Processors()
	var names []string
	for _, p := range replicas {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"event-processor", "event-processor-2"}) {
		t.Fatalf("event-processor replicas %v, want event-processor and event-processor-2", names)
	}
	a, b := replicas[0], replicas[1]
	if a.Admin == "" || a.Admin == b.Admin || a.PID() == 0 || a.PID() == b.PID() {
		t.Errorf("replicas share an admin address or a process: %s (pid %d) and %s (pid %d)", a.Admin, a.PID(), b.Admin, b.PID())
	}
	for _, p := range replicas {
		if err := waitReady(ctx, p.Admin); err != nil {
			t.Errorf("%s at %s: %v", p.Name, p.Admin, err)
		}
	}
	usage := ps.Usage()
	for _, n := range names {
		if _, ok := usage[n]; !ok || !IsProcessor(n) {
			t.Errorf("%s: no CPU reading (%v) or not known as a replica (%v)", n, ok, IsProcessor(n))
		}
	}
}

func TestProcessorName(t *testing.T) {
	for i, want := range []string{"event-processor", "event-processor-2", "event-processor-3"} {
		if got := ProcessorName(i); got != want || !IsProcessor(got) {
			t.Errorf("ProcessorName(%d) = %q (a replica: %v), want %q", i, got, IsProcessor(got), want)
		}
	}
	for _, name := range []string{"event-processor-1", "event-processor-x", "event-processors", "gate-all", "memory-writer", ""} {
		if IsProcessor(name) {
			t.Errorf("IsProcessor(%q): want false", name)
		}
	}
}

// A stack that cannot start (here: no binaries) is an error, with whatever started stopped, not
// a panic.
func TestStartProcsFailsWithAnError(t *testing.T) {
	ps, err := StartProcs(context.Background(), ProcsOptions{BinDir: t.TempDir(), DataDir: t.TempDir()})
	if err == nil || ps != nil {
		t.Fatalf("StartProcs without binaries: %v, %v; want an error and no stack", ps, err)
	}
}
