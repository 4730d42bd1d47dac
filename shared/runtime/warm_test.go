package runtime

import (
	"testing"
)

// goRun runs its function on a pooled goroutine (BenchmarkHandlerStack shows the reuse); once
// the pool is released (the app is stopping), or without one, on a goroutine of its own.
func TestWarmRunsOnAPooledGoroutine(t *testing.T) {
	w, err := newWarm()
	if err != nil {
		t.Fatal(err)
	}
	defer w.release()
	ran := make(chan int, 3)
	for i := range 3 {
		w.goRun(func() { ran <- i })
		if got := <-ran; got != i {
			t.Fatalf("ran %d, want %d", got, i)
		}
	}
	w.release()
	w.goRun(func() { ran <- 7 })
	if got := <-ran; got != 7 {
		t.Fatalf("after release: ran %d", got)
	}
	var none *warm
	none.goRun(func() { ran <- 8 })
	if got := <-ran; got != 8 {
		t.Fatalf("no pool: ran %d", got)
	}
}

// deepStack uses about 1 KiB of stack per level, as a handler does through JSON decoding,
// crypto and a client's call chain.
//
//go:noinline
func deepStack(n int) int {
	var buf [1024]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return int(buf[0])
	}
	return deepStack(n-1) + int(buf[n%len(buf)])
}

// BenchmarkHandlerStack is one message's handler needing a 32 KiB stack, started on a goroutine
// per message: run there, its stack grows by copying on every message; on a warm goroutine,
// once.
func BenchmarkHandlerStack(b *testing.B) {
	handler := func() error { deepStack(32); return nil }
	b.Run("goroutine-per-message", func(b *testing.B) {
		for b.Loop() {
			done := make(chan error)
			go func() { done <- handler() }()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("warm", func(b *testing.B) {
		w, err := newWarm()
		if err != nil {
			b.Fatal(err)
		}
		defer w.release()
		for b.Loop() {
			done := make(chan error)
			w.goRun(func() { done <- handler() })
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	})
}
