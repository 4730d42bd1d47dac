package runtime

import (
	"errors"
	"testing"
)

// A handler run on a warm goroutine returns its error, and its panic is raised on the caller's
// goroutine, as if it had run there (the recoverer middleware and the process see it the same).
func TestWarmRunsOnAPooledGoroutine(t *testing.T) {
	w, err := newWarm()
	if err != nil {
		t.Fatal(err)
	}
	defer w.release()
	want := errors.New("graph unavailable")
	if err := w.run(func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the handler's panic", p)
			}
		}()
		_ = w.run(func() error { panic("boom") })
		t.Fatal("the panic did not reach the caller")
	}()
	w.release()
	ran := false
	if err := w.run(func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("after release: ran %v, %v (it runs on the caller's goroutine)", ran, err)
	}
	var none *warm
	if err := none.run(func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("no pool: %v", err)
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

// BenchmarkHandlerStack is one message's handler needing a 32 KiB stack, started as watermill
// starts it (a goroutine per message): run there, its stack grows by copying on every
// message; on a warm goroutine, once.
func BenchmarkHandlerStack(b *testing.B) {
	handler := func() error { deepStack(32); return nil }
	b.Run("goroutine-per-message", func(b *testing.B) {
		for b.Loop() {
			done := make(chan error)
			go func() { done <- handler() }()
			<-done
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
			go func() { done <- w.run(handler) }()
			<-done
		}
	})
}
