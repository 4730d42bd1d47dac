package aiworker

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// The cache asks the watch whether it hears the exit changes on every move. The soak of
// 2026-11-25 found the ai-worker at 171,579 goroutines after 85,000 moves: each look asked the
// ordered consumers for Closed(), which starts a goroutine that lives until the consumer stops.
// Looking must cost no goroutine.
func TestLookingAtTheExitWatchLeaksNoGoroutine(t *testing.T) {
	e := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := followExits(ctx, e.JS, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.stop()
	if ok, _ := w.state(); !ok {
		t.Fatal("the watch does not hear the exit changes right after it started")
	}
	before := runtime.NumGoroutine()
	for range 2000 {
		if ok, _ := w.state(); !ok {
			t.Fatal("the watch stopped hearing the exit changes")
		}
	}
	time.Sleep(100 * time.Millisecond)
	if after := runtime.NumGoroutine(); after > before+20 {
		t.Fatalf("2,000 looks at the watch left %d goroutines behind (%d → %d)", after-before, before, after)
	}
	w.stop()
	natstest.WaitFor(t, 10*time.Second, "the watch reports its consumers stopped", func() bool {
		ok, _ := w.state()
		return !ok
	})
}
