package harness

import (
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
)

// Host describes the machine figures come from.
type Host struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	GoVersion string `json:"goVersion"`
	LoadAvg   string `json:"loadAvg"` // at the start of the run: other work on the machine skews figures
}

// ThisHost reads /proc/cpuinfo and /proc/loadavg.
func ThisHost() Host {
	h := Host{CPUs: goruntime.NumCPU(), GoVersion: goruntime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			h.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return h
}

func (h Host) String() string {
	return fmt.Sprintf("%d CPUs, %s, %s, load average %s", h.CPUs, h.CPUModel, h.GoVersion, h.LoadAvg)
}
