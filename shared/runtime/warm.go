package runtime

import (
	"time"

	"github.com/panjf2000/ants/v2"
)

// warmIdle is how long a pooled goroutine waits for its next message before it exits.
const warmIdle = time.Minute

// warm runs each message's handling on a reused goroutine (ants). A goroutine started per
// message has its stack grow, by copying, through JSON, crypto and the clients on every
// message: perf put stack growth at 5 % of a move's CPU over the gate, the event-processor and
// the ai-worker (2026-11-26, docs/performance.md). A pooled goroutine grows its stack once;
// the garbage collector may shrink an idle one.
type warm struct{ pool *ants.Pool }

func newWarm() (*warm, error) {
	p, err := ants.NewPool(-1, ants.WithExpiryDuration(warmIdle), ants.WithLogger(discard{}))
	if err != nil {
		return nil, err
	}
	return &warm{pool: p}, nil
}

// goRun runs f on a pooled goroutine; on a goroutine of its own when there is no pool or it
// was released (the app is stopping).
func (w *warm) goRun(f func()) {
	if w == nil || w.pool.Submit(f) != nil {
		go f()
	}
}

func (w *warm) release() {
	if w != nil {
		w.pool.Release()
	}
}

// discard is ants' logger, silenced: run recovers panics itself.
type discard struct{}

func (discard) Printf(string, ...any) {}
