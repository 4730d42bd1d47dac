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
