package natsx_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// Every stored key is listed while the keys are being put again, in a bucket that keeps five
// revisions of each (approvals) and in one that keeps one (budget): jetstream's own listing
// (ListKeys) came back short here (27 of 300), and so did a watch ended by the server's pending
// count; short listings moved partitions between live replicas, and hid held proposals from an
// approver's list and budget definitions from worldgate replay.
func TestListKeysIsCompleteWhileKeysArePut(t *testing.T) {
	for _, bucket := range []string{natsx.BucketApprovals, natsx.BucketBudget} {
		t.Run(bucket, func(t *testing.T) { listWhilePut(t, bucket) })
	}
}

func listWhilePut(t *testing.T, bucket string) {
	e := natstest.Start(t)
	ctx := context.Background()
	kv := e.KeyValue(t, bucket)
	var want []string
	for i := range 6 {
		k := fmt.Sprintf("held.%d", i)
		want = append(want, k)
		if _, err := kv.PutString(ctx, k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.PutString(ctx, "gone", "v"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := kv.PutString(ctx, want[i%len(want)], fmt.Sprint(i)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	short := 0
	for range 300 {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := natsx.ListKeys(lctx, e.JS, bucket)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			short++
			if short <= 3 {
				t.Errorf("listed %v, want %v", got, want)
			}
		}
	}
	close(stop)
	wg.Wait()
	if short > 0 {
		t.Errorf("%d of 300 listings were not the stored keys", short)
	}
}

// A filter lists only the keys it matches; a bucket without any gives an empty list.
func TestListKeysFiltersAndEmpty(t *testing.T) {
	e := natstest.Start(t)
	ctx := context.Background()
	kv := e.KeyValue(t, natsx.BucketBudget)
	if got, err := natsx.ListKeys(ctx, e.JS, natsx.BucketBudget); err != nil || len(got) != 0 {
		t.Fatalf("empty bucket: %v, %v", got, err)
	}
	for _, k := range []string{"def.a", "def.b", "ctl.a"} {
		if _, err := kv.PutString(ctx, k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := natsx.ListKeys(ctx, e.JS, natsx.BucketBudget, "def.>")
	if err != nil || !slices.Equal(got, []string{"def.a", "def.b"}) {
		t.Fatalf("def.>: %v, %v", got, err)
	}
	if got, err := natsx.ListKeys(ctx, e.JS, natsx.BucketBudget, "none.*"); err != nil || len(got) != 0 {
		t.Fatalf("none.*: %v, %v", got, err)
	}
}
