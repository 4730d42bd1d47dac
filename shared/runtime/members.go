package runtime

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/natsx"
)

// memberView is one replica's view of the members of a partitioned consumer, kept from a watch
// of their keys in natsx.BucketMembers rather than listed at each heartbeat.
//
// Why not a listing: jetstream's ListKeysFiltered ends at the watch's "initial values done"
// marker, which nats.go v1.55 sends once the server's pending count reaches zero, and while other
// keys are being put that can come before every key arrived: six keys put every few
// milliseconds came back short in 27 of 300 listings (2026-11-27). With replicas heartbeating
// each second, bench with six replicas saw 21 membership changes in 40 s and no replica
// stopped: each short list moved partitions between live replicas, and each move cost the
// partition's messages a resynchronisation (up to a second at the commit, the half-rate p99).
//
// A member counts while its last put is within the keys' life of the newest put seen (the
// server's timestamps: no clock of this replica is compared with another's); a deleted key (a
// replica that left) counts no more at once.
type memberView struct {
	mu    sync.Mutex
	last  map[string]time.Time // member key → when its last put was stored
	ready bool                 // the watch has delivered the keys present when it started
	in    natsx.Initial        // tells when that is (the nil marker alone can come early)
}

func newMemberView() *memberView { return &memberView{last: map[string]time.Time{}} }

// apply takes one update of the watch, nil for its marker.
func (v *memberView) apply(e jetstream.KeyValueEntry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.in.Done(e) {
		v.ready = true
	}
	if e == nil {
		return
	}
	switch e.Operation() {
	case jetstream.KeyValuePut:
		if e.Created().After(v.last[e.Key()]) {
			v.last[e.Key()] = e.Created()
		}
	default: // deleted or purged: the replica left
		delete(v.last, e.Key())
	}
}

// errMembersPending: the watch has not delivered the initial values yet.
var errMembersPending = errors.New("the members are still being read")

// awaitReady waits until the watch delivered its initial values, closing is closed, or at most
// limit.
func (v *memberView) awaitReady(closing <-chan struct{}, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		v.mu.Lock()
		ready := v.ready
		v.mu.Unlock()
		if ready {
			return
		}
		select {
		case <-closing:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// restart forgets that the watch was complete (a new watch starts); what it saw stays, aging as
// before, until the new watch renews or deletes it.
func (v *memberView) restart() {
	v.mu.Lock()
	v.ready, v.in = false, natsx.Initial{}
	v.mu.Unlock()
}

// live returns the members whose last put is within ttl of the newest one, sorted; an error
// until the watch delivered its initial values, or when self is not among them.
func (v *memberView) live(self string, ttl time.Duration) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.ready {
		return nil, errMembersPending
	}
	var newest time.Time
	for _, t := range v.last {
		if t.After(newest) {
			newest = t
		}
	}
	out := make([]string, 0, len(v.last))
	for k, t := range v.last {
		if newest.Sub(t) > ttl {
			delete(v.last, k) // gone: its key has expired from the bucket too
			continue
		}
		out = append(out, k)
	}
	if !slices.Contains(out, self) {
		return nil, errors.New("this replica's own key is missing")
	}
	slices.Sort(out)
	return out, nil
}
