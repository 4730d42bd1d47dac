package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Percentile returns the p-th percentile (0 < p ≤ 100) of ds, nearest rank; 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Ms is d in milliseconds with two decimals, for figures.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()/10) / 100 }

// SelfUsage is this process's CPU time (user + system) and peak RSS so far.
func SelfUsage() (cpu time.Duration, peakRSS int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpu, ru.Maxrss * 1024 // Linux reports KiB
}

// ProcStat is a process's memory, CPU and context switches as /proc reports them.
type ProcStat struct {
	RSS     int64         // resident now, bytes
	PeakRSS int64         // VmHWM, bytes
	CPU     time.Duration // user + system
	SysCPU  time.Duration // system: the part of CPU spent in the kernel on the process's behalf
	// Switches counts the times the process's threads gave up the CPU (to wait) or lost it
	// (preempted): voluntary and involuntary context switches, summed over the threads it has
	// now (an exited thread's are lost; a Go process keeps its threads). Each is a wake-up the
	// kernel made, and what a message costs beyond its own work.
	Switches int64
}

// ReadProc reads /proc/<pid>/status, /proc/<pid>/stat and its threads' status.
func ReadProc(pid int) (ProcStat, error) {
	var s ProcStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			s.RSS = n * 1024
		case "VmHWM":
			s.PeakRSS = n * 1024
		}
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// Fields after the command (which may hold spaces) start after the last ')'.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+2:]
	}
	f := strings.Fields(rest)
	if len(f) > 12 {
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		s.CPU = time.Duration(ut+st) * (time.Second / 100) // USER_HZ is 100 on Linux
		s.SysCPU = time.Duration(st) * (time.Second / 100)
	}
	s.Switches = threadSwitches(pid)
	return s, nil
}

// threadSwitches sums voluntary_ctxt_switches and nonvoluntary_ctxt_switches over the threads of
// pid (/proc/<pid>/status has the main thread's only).
func threadSwitches(pid int) int64 {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/status")
		if err != nil {
			continue // the thread exited meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}

// Spent is what named processes used between two readings of ReadProc, summed and by process:
// the CPU of each process read at both ends whose CPU did not go back (a restart starts its
// counters again), and the kernel time and context switches of those whose switches did not go
// back either.
type Spent struct {
	CPU, Sys     time.Duration
	Switches     int64
	ProcCPU      map[string]time.Duration
	ProcSwitches map[string]int64
}

// Between is what the processes of to spent since from.
func Between(from, to map[string]ProcStat) Spent {
	s := Spent{ProcCPU: map[string]time.Duration{}, ProcSwitches: map[string]int64{}}
	for name, end := range to {
		start, ok := from[name]
		if !ok || end.CPU < start.CPU {
			continue
		}
		s.CPU += end.CPU - start.CPU
		s.ProcCPU[name] = end.CPU - start.CPU
		if end.Switches >= start.Switches {
			s.Sys += end.SysCPU - start.SysCPU
			s.ProcSwitches[name] = end.Switches - start.Switches
			s.Switches += s.ProcSwitches[name]
		}
	}
	return s
}

// KernelShare is the part of the CPU spent in the kernel (0 when none was spent).
func (s Spent) KernelShare() float64 {
	if s.CPU <= 0 {
		return 0
	}
	return s.Sys.Seconds() / s.CPU.Seconds()
}

// MiB formats bytes as MiB.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// Progress writes one status line to w: rewritten in place on a terminal, else one line per
// call that changed it.
type Progress struct {
	W    io.Writer
	tty  bool
	last string
}

// NewProgress returns a Progress on w.
func NewProgress(w io.Writer) *Progress {
	p := &Progress{W: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// Update shows line.
func (p *Progress) Update(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	switch {
	case p.tty:
		fmt.Fprint(p.W, "\r\033[K"+line)
	case line != p.last:
		fmt.Fprintln(p.W, line)
	}
	p.last = line
}

// Done ends the line on a terminal.
func (p *Progress) Done() {
	if p.tty && p.last != "" {
		fmt.Fprintln(p.W)
	}
	p.last = ""
}

// Report prints a run's result, even a failed run's, and writes it as JSON to jsonPath when one
// is given; it returns the run's error, else the write's.
func Report[R any](w io.Writer, res *R, runErr error, jsonPath string, print func(io.Writer, *R)) error {
	if res == nil {
		return runErr
	}
	print(w, res)
	if jsonPath != "" {
		if err := WriteJSON(jsonPath, res); err != nil && runErr == nil {
			return err
		}
	}
	return runErr
}

// WriteJSON writes v as indented JSON to path ("-" for stdout).
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
