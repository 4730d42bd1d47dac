// Package slowtest marks the slow tests: the end-to-end ones (a dev stack, a process stack, a
// NATS cluster) and the others that take more than about five seconds. `make test` runs them;
// `make test-fast` (go test -short) skips them, each saying what it is.
package slowtest

import "testing"

// Skip skips t under -short, naming what it is ("end-to-end (the dev stack and its demo)"):
// call it first in a slow test.
func Skip(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what + ": make test runs it")
	}
}
