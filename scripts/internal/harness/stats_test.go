package harness

import (
	"os"
	"testing"
	"time"
)

// ReadProc sums the context switches of every thread of a process: a process whose threads
// sleep switches, and the count only grows.
func TestReadProcCountsEveryThreadsSwitches(t *testing.T) {
	before, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for range 4 {
		go func() {
			for range 20 {
				time.Sleep(time.Millisecond) // a voluntary switch each, on whatever thread runs it
			}
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	after, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.Switches <= before.Switches || before.Switches <= 0 {
		t.Fatalf("context switches %d, then %d after 80 sleeps", before.Switches, after.Switches)
	}
	if after.SysCPU < 0 || after.SysCPU > after.CPU {
		t.Fatalf("system CPU %v of %v in all", after.SysCPU, after.CPU)
	}
}

// Between sums what processes read at both ends spent, leaves out a process that restarted in
// between (its counters went back) and one read only at one end, and counts the kernel time and
// switches only of processes whose switches did not go back.
func TestBetweenLeavesOutRestartedProcesses(t *testing.T) {
	ms := time.Millisecond
	from := map[string]ProcStat{
		"nats":      {CPU: 100 * ms, SysCPU: 40 * ms, Switches: 10},
		"graphd":    {CPU: 500 * ms, SysCPU: 100 * ms, Switches: 50}, // restarts
		"gate":      {CPU: 10 * ms, SysCPU: 0, Switches: 5},          // a thread exits: switches go back
		"gone-soon": {CPU: 1 * ms},
	}
	to := map[string]ProcStat{
		"nats":    {CPU: 300 * ms, SysCPU: 140 * ms, Switches: 30},
		"graphd":  {CPU: 20 * ms, SysCPU: 5 * ms, Switches: 3},
		"gate":    {CPU: 60 * ms, SysCPU: 20 * ms, Switches: 4},
		"started": {CPU: 7 * ms, Switches: 2},
	}
	s := Between(from, to)
	if s.CPU != 250*ms || s.ProcCPU["nats"] != 200*ms || s.ProcCPU["gate"] != 50*ms || len(s.ProcCPU) != 2 {
		t.Errorf("CPU %v by process %v: want 250ms (nats 200ms, gate 50ms), graphd left out (restarted), the others read at one end only", s.CPU, s.ProcCPU)
	}
	if s.Sys != 100*ms || s.Switches != 20 || len(s.ProcSwitches) != 1 || s.ProcSwitches["nats"] != 20 {
		t.Errorf("kernel %v, switches %d by process %v: want nats's alone (100ms, 20)", s.Sys, s.Switches, s.ProcSwitches)
	}
	if got := s.KernelShare(); got != 0.4 {
		t.Errorf("kernel share %v, want 100ms of 250ms = 0.4", got)
	}
	if (Spent{}).KernelShare() != 0 {
		t.Errorf("no CPU spent must give a kernel share of 0")
	}
}
