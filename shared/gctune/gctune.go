// Package gctune sets a Worldgate process's garbage collector when it starts: its GOGC, and a
// soft memory limit at 90 % of the container's memory limit.
//
// Processes that speak MCP make garbage faster than they keep data: the MCP SDK allocates a
// fresh 32 KiB decode buffer for every JSON-RPC message it reads (several per tool call), while
// the live heap of an MCP server is a few MiB. At Go's default GOGC=100 such a process collects
// every few dozen calls (measured: 24–31 % less CPU in the MCP servers and the ai-worker at
// GOGC=400, docs/deploy.md). A higher GOGC lets the heap grow further between collections; the soft
// memory limit makes the collector work harder before the container's limit is reached instead
// of letting the kernel kill the process.
//
// The environment wins: GOGC and GOMEMLIMIT, when set, are left as Go's runtime read them
// (AUTOMEMLIMIT=off or a ratio such as AUTOMEMLIMIT=0.8 changes the limit's share; see
// github.com/KimMachineGun/automemlimit).
package gctune

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// Percents the services start with when GOGC is not set.
const (
	// Default is Go's own.
	Default = 100
	// ShortLived is for processes whose garbage is mostly per-message buffers: the MCP servers
	// and their heaviest client, the ai-worker.
	ShortLived = 400
)

// Ratio is the share of the container's memory limit used as the soft limit.
const Ratio = 0.9

// Settings is what Apply left in effect.
type Settings struct {
	Percent     int    // GOGC in effect
	PercentFrom string // "GOGC" (the environment) or "default"
	Limit       int64  // soft memory limit in bytes; math.MaxInt64 is none
	LimitFrom   string // "GOMEMLIMIT" (the environment), "cgroup", or "none"
}

// Apply sets GOGC to percent unless the environment sets it, and the soft memory limit to Ratio
// of the cgroup's memory limit unless GOMEMLIMIT is set or there is no cgroup limit. It logs
// what it left in effect.
func Apply(percent int, log *slog.Logger) Settings {
	return apply(percent, memlimit.FromCgroup, log)
}

func apply(percent int, limit memlimit.Provider, log *slog.Logger) Settings {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := Settings{PercentFrom: "default", LimitFrom: "none"}
	if _, ok := os.LookupEnv("GOGC"); ok {
		s.PercentFrom = "GOGC"
		s.Percent = debug.SetGCPercent(Default)
		debug.SetGCPercent(s.Percent) // read back: the runtime parsed the variable at start
	} else {
		debug.SetGCPercent(percent)
		s.Percent = percent
	}
	_, envLimit := os.LookupEnv("GOMEMLIMIT")
	l, err := memlimit.Set(memlimit.WithProvider(limit), memlimit.WithRatio(Ratio))
	switch {
	case envLimit:
		s.LimitFrom = "GOMEMLIMIT"
	case err != nil:
		// No memory controller (a developer's machine, a process outside a container): no limit.
		log.Debug("no container memory limit found; the soft memory limit stays unset", "reason", err.Error())
	case l != math.MaxInt64:
		s.LimitFrom = "cgroup"
	}
	s.Limit = debug.SetMemoryLimit(-1)
	log.Info("garbage collector", "gogc", s.Percent, "gogcFrom", s.PercentFrom, "memoryLimitBytes", s.Limit, "memoryLimitFrom", s.LimitFrom)
	return s
}
