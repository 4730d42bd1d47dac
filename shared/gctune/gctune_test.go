package gctune

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// restore puts the collector and the environment back as the test found them.
func restore(t *testing.T) {
	t.Helper()
	percent := debug.SetGCPercent(Default)
	debug.SetGCPercent(percent)
	limit := debug.SetMemoryLimit(-1)
	env := map[string]*string{}
	for _, k := range []string{"GOGC", "GOMEMLIMIT", "AUTOMEMLIMIT"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = &v
		} else {
			env[k] = nil
		}
		os.Unsetenv(k)
	}
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
		for k, v := range env {
			if v == nil {
				os.Unsetenv(k)
			} else {
				os.Setenv(k, *v)
			}
		}
	})
}

func current() (int, int64) {
	p := debug.SetGCPercent(Default)
	debug.SetGCPercent(p)
	return p, debug.SetMemoryLimit(-1)
}

func TestDefaultsAndTheContainerLimit(t *testing.T) {
	restore(t)
	s := apply(ShortLived, memlimit.Limit(256<<20), nil)
	p, l := current()
	mib256 := float64(256 << 20)
	want := int64(mib256 * Ratio)
	if p != ShortLived || l != want {
		t.Fatalf("collector at GOGC=%d, limit %d; want %d and %d (90 %% of 256 MiB)", p, l, ShortLived, want)
	}
	if s != (Settings{Percent: ShortLived, PercentFrom: "default", Limit: want, LimitFrom: "cgroup"}) {
		t.Fatalf("settings %+v", s)
	}
}

func TestTheEnvironmentWins(t *testing.T) {
	restore(t)
	debug.SetGCPercent(150) // as if the runtime had read GOGC=150 at start
	debug.SetMemoryLimit(64 << 20)
	os.Setenv("GOGC", "150")
	os.Setenv("GOMEMLIMIT", "64MiB")
	s := apply(ShortLived, memlimit.Limit(256<<20), nil)
	p, l := current()
	if p != 150 || l != 64<<20 {
		t.Fatalf("collector at GOGC=%d, limit %d; want the environment's 150 and 64 MiB left alone", p, l)
	}
	if s.PercentFrom != "GOGC" || s.LimitFrom != "GOMEMLIMIT" || s.Percent != 150 || s.Limit != 64<<20 {
		t.Fatalf("settings %+v", s)
	}
}

func TestNoContainerLimitLeavesNone(t *testing.T) {
	restore(t)
	debug.SetMemoryLimit(math.MaxInt64)
	s := apply(Default, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, nil)
	if _, l := current(); l != math.MaxInt64 || s.LimitFrom != "none" || s.Percent != Default {
		t.Fatalf("limit %d, settings %+v; want no limit", l, s)
	}
	s = apply(Default, func() (uint64, error) { return 0, os.ErrNotExist }, nil)
	if _, l := current(); l != math.MaxInt64 || s.LimitFrom != "none" {
		t.Fatalf("limit %d, settings %+v after a provider error; want no limit", l, s)
	}
}
