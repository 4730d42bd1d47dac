// Package runtimetest runs a worker's runtime.App for a test.
package runtimetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
)

// Start runs app until the test ends, or until stop is called (once; later calls do nothing),
// after waiting up to 10 s for its handlers to be ready. An error from Run fails the test.
func Start(t testing.TB, app *runtime.App) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	natstest.WaitFor(t, 10*time.Second, "the app's handlers ready", func() bool {
		select {
		case err := <-done:
			done <- err // Run ended before it was ready: stop reports it
			return true
		default:
		}
		return app.Ready(ctx) == nil
	})
	return stop
}
