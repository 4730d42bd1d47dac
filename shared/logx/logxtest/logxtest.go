// Package logxtest holds test helpers for logs.
package logxtest

import (
	"bytes"
	"sync"
)

// Buffer is a log destination that goroutines of the code under test may write while the test
// reads it (a bytes.Buffer alone is a data race then).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Reset forgets what was written.
func (l *Buffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}
