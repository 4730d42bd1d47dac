package natsx

import "testing"

// SetFreeDisk makes StartEmbedded see f's answer for the free disk until the test ends.
func SetFreeDisk(t testing.TB, f func(dir string) int64) {
	old := freeDisk
	freeDisk = f
	t.Cleanup(func() { freeDisk = old })
}
