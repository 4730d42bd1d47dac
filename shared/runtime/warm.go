package runtime

import (
	"time"

	"github.com/panjf2000/ants/v2"
)

// warmIdle is how long a pooled goroutine waits for its next message before it exits.
const warmIdle = time.Minute

// warm runs each message's handler chain on a reused goroutine (ants). Watermill starts a
// goroutine per message, and that goroutine's stack used to grow, by copying, through JSON,
// crypto and the clients on every message: perf put stack growth at 5 % of a move's CPU over
// the gate, the event-processor and the ai-worker (2026-11-26, docs/performance.md). A pooled
// goroutine grows its stack once; the garbage collector may shrink an idle one.
type warm struct{ pool *ants.Pool }

func newWarm() (*warm, error) {
	p, err := ants.NewPool(-1, ants.WithExpiryDuration(warmIdle), ants.WithLogger(discard{}))
	if err != nil {
		return nil, err
	}
	return &warm{pool: p}, nil
}

// run calls f on a pooled goroutine and waits for it; a panic in f is raised again here, on
// the caller's goroutine, as if f had run there. A nil or released pool runs f here.
func (w *warm) run(f func() error) error {
	if w == nil {
		return f()
	}
	var err error
	var panicked any
	done := make(chan struct{})
	submitErr := w.pool.Submit(func() {
		defer close(done)
		defer func() { panicked = recover() }()
		err = f()
	})
	if submitErr != nil { // released: the app is stopping
		return f()
	}
	<-done
	if panicked != nil {
		panic(panicked)
	}
	return err
}

func (w *warm) release() {
	if w != nil {
		w.pool.Release()
	}
}

// discard is ants' logger, silenced: run recovers panics itself.
type discard struct{}

func (discard) Printf(string, ...any) {}
