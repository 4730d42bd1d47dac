//go:build unix

package natsx

import (
	"os"
	"syscall"
)

// freeDisk is what NATS takes for its store limit when none is configured: three quarters of
// the space free under dir (creating it), or -1 when that is unknown. A variable, so that tests
// can stand in for a full disk.
var freeDisk = func(dir string) int64 {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return -1
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return -1
	}
	return int64(uint64(fs.Bavail) * uint64(fs.Bsize) / 4 * 3)
}
