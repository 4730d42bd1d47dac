package natsx

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// Initial tells when a key-value watch has delivered every value stored when it started.
//
// Why not the watch's nil marker alone: nats.go (v1.55) sends it once it has received as many
// updates as there were keys when the watch started, and an update of a key already delivered
// counts towards that number, so while keys are being put the marker can come before every
// stored key did: six keys put in a loop, and 27 of 300 of jetstream's listings (ListKeys, which
// ends at the marker) came back short (2026-11-27). Each update carries how many messages the
// watch had still to deliver (Delta); at 0 it has caught up with the bucket.
//
// That is exact for a watch of every revision (jetstream.IncludeHistory: the server delivers the
// stream in order). A watch of the last revision per key (the default) can still miss a key that
// is put again while the watch starts: the server skips the revision it meant to deliver, which
// is no longer the last, and counts nothing for the newer one (13 to 41 listings of 300 short
// with Delta alone, nats-server v2.15.2). ListKeys therefore reads every revision; a watch that
// follows a bucket for its life (memberView, actorpolicy.Watch, the budget ledger) gets the
// newer revision a moment later anyway.
type Initial struct {
	received int
	done     bool
}

// Done takes the watch's next update, nil for its marker, and reports whether the initial
// values are in: at an update after which nothing was pending, or at the marker of a watch
// that found nothing stored. Once true it stays true.
func (in *Initial) Done(e jetstream.KeyValueEntry) bool {
	switch {
	case in.done:
	case e == nil:
		in.done = in.received == 0
	default:
		in.received++
		in.done = e.Delta() == 0
	}
	return in.done
}

// ListKeys lists the keys of kv that match filters (every key when there are none), sorted:
// every key stored when the listing started and not deleted since, even while keys are being
// put (jetstream's ListKeys and ListKeysFiltered can come back short then: see Initial). It
// reads the headers of every revision the bucket keeps (its history), not only the last. A
// bucket with no matching key gives an empty list, not an error.
func ListKeys(ctx context.Context, kv jetstream.KeyValue, filters ...string) ([]string, error) {
	if len(filters) == 0 {
		filters = []string{">"}
	}
	w, err := kv.WatchFiltered(ctx, filters, jetstream.MetaOnly(), jetstream.IncludeHistory())
	if err != nil {
		return nil, fmt.Errorf("list the keys of %s: %w", kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	keys := map[string]bool{}
	var in Initial
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list the keys of %s: %w", kv.Bucket(), ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("list the keys of %s: %w", kv.Bucket(), errors.New("the watch ended before the stored keys were read"))
			}
			if e != nil {
				if e.Operation() == jetstream.KeyValuePut {
					keys[e.Key()] = true
				} else {
					delete(keys, e.Key())
				}
			}
			if in.Done(e) {
				out := make([]string, 0, len(keys))
				for k := range keys {
					out = append(out, k)
				}
				slices.Sort(out)
				return out, nil
			}
		}
	}
}
