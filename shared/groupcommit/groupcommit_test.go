package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/groupcommit"
)

// recorder is a send that holds each request until release is closed and records what each
// carried.
type recorder struct {
	release chan struct{}
	mu      sync.Mutex
	sent    [][]int
	started chan int
}

func (r *recorder) send(_ context.Context, items []int) []groupcommit.Result[string] {
	r.started <- len(items)
	<-r.release
	r.mu.Lock()
	r.sent = append(r.sent, slices.Clone(items))
	r.mu.Unlock()
	out := make([]groupcommit.Result[string], len(items))
	for i, it := range items {
		if it < 0 {
			out[i].Err = fmt.Errorf("item %d refused", it)
			continue
		}
		out[i].Value = fmt.Sprint("answer ", it)
	}
	return out
}

// A call goes at once while fewer than Requests requests are in flight; the calls that arrive
// meanwhile wait and go together in the next request, up to Max; each caller gets its own
// item's answer or error.
func TestCallsThatWaitShareTheNextRequest(t *testing.T) {
	r := &recorder{release: make(chan struct{}), started: make(chan int, 100)}
	g := groupcommit.New(2, 1, r.send)
	var wg sync.WaitGroup
	got := make([]string, 6)
	errs := make([]error, 6)
	do := func(i, item int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = g.Do(context.Background(), item)
		}()
	}
	do(0, 10)
	if n := <-r.started; n != 1 {
		t.Fatalf("the first call went in a request of %d", n)
	}
	for i, item := range []int{11, -12, 13, 14, 15} {
		do(i+1, item)
	}
	for deadline := time.Now().Add(10 * time.Second); g.Waiting() < 5; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued behind the request in flight, want 5", g.Waiting())
		}
	}
	close(r.release)
	wg.Wait()
	for i, item := range []int{10, 11, -12, 13, 14, 15} {
		if item < 0 {
			if errs[i] == nil || got[i] != "" {
				t.Errorf("call %d: %q %v, want its refusal", i, got[i], errs[i])
			}
			continue
		}
		if want := fmt.Sprint("answer ", item); got[i] != want || errs[i] != nil {
			t.Errorf("call %d: %q %v, want %q", i, got[i], errs[i], want)
		}
	}
	sizes := []int{}
	for _, s := range r.sent {
		sizes = append(sizes, len(s))
	}
	if fmt.Sprint(sizes) != "[1 2 2 1]" {
		t.Errorf("requests carried %v calls, want [1 2 2 1]: one alone, then the five that waited two at a time", sizes)
	}
}

// A request whose send panics, or answers for another number of calls, fails each of its calls
// with an error; no caller is left waiting.
func TestABrokenRequestFailsItsCalls(t *testing.T) {
	for name, send := range map[string]func(context.Context, []int) []groupcommit.Result[int]{
		"panics": func(context.Context, []int) []groupcommit.Result[int] { panic("boom") },
		"short":  func(context.Context, []int) []groupcommit.Result[int] { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			g := groupcommit.New(8, 1, send)
			var wg sync.WaitGroup
			for i := range 5 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := g.Do(context.Background(), i); err == nil {
						t.Errorf("call %d: no error", i)
					}
				}()
			}
			wg.Wait()
			var pe *groupcommit.PanicError
			if _, err := g.Do(context.Background(), 9); name == "panics" && !errors.As(err, &pe) {
				t.Errorf("after the others: %v, want a PanicError", err)
			}
		})
	}
}

// The request does not end with the context of the caller that sends it: it carries other
// callers' items.
func TestTheRequestOutlivesItsSendersCancellation(t *testing.T) {
	g := groupcommit.New(8, 1, func(ctx context.Context, items []int) []groupcommit.Result[error] {
		return []groupcommit.Result[error]{{Value: ctx.Err()}}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v, err := g.Do(ctx, 1); v != nil || err != nil {
		t.Fatalf("the request saw %v (%v), want a live context", v, err)
	}
}
