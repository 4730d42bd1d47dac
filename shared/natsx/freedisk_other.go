//go:build !unix

package natsx

// freeDisk is unknown here: NATS's own estimate applies (see the unix version).
var freeDisk = func(string) int64 { return -1 }
