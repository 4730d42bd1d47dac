package runtime

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// entry is a members-bucket update as the watch delivers it.
type entry struct {
	key string
	at  time.Time
	op  jetstream.KeyValueOp
	// pending is what the watch had still to deliver after it (Delta)
	pending uint64
}

func (e entry) Bucket() string                  { return "worldgate-members" }
func (e entry) Key() string                     { return e.key }
func (e entry) Value() []byte                   { return nil }
func (e entry) Revision() uint64                { return 0 }
func (e entry) Created() time.Time              { return e.at }
func (e entry) Delta() uint64                   { return e.pending }
func (e entry) Operation() jetstream.KeyValueOp { return e.op }

// A member counts while its last put is within the keys' life of the newest put the watch saw,
// a deleted key counts no more at once, and nothing is shared before the initial values are in.
func TestMemberView(t *testing.T) {
	const ttl = 5 * time.Second
	t0 := time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC)
	v := newMemberView()
	v.apply(entry{"p.a", t0, jetstream.KeyValuePut, 2})
	if _, err := v.live("p.a", ttl); !errors.Is(err, errMembersPending) {
		t.Fatalf("before the initial values: %v, want errMembersPending", err)
	}
	v.apply(nil) // nats.go's marker can come before every stored key did (natsx.Initial)
	if _, err := v.live("p.a", ttl); !errors.Is(err, errMembersPending) {
		t.Fatalf("after an early marker: %v, want errMembersPending", err)
	}
	v.apply(entry{"p.b", t0.Add(time.Second), jetstream.KeyValuePut, 0}) // nothing pending after it
	check := func(self string, want ...string) {
		t.Helper()
		got, err := v.live(self, ttl)
		if err != nil {
			t.Fatalf("live: %v", err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("members %v, want %v", got, want)
		}
	}
	check("p.a", "p.a", "p.b")
	v.apply(entry{"p.c", t0.Add(2 * time.Second), jetstream.KeyValuePut, 0})
	v.apply(entry{"p.a", t0.Add(3 * time.Second), jetstream.KeyValuePut, 0})
	v.apply(entry{"p.c", t0.Add(time.Second), jetstream.KeyValuePut, 0}) // an older put arriving late changes nothing
	check("p.a", "p.a", "p.b", "p.c")
	// p.b stops renewing: gone once the newest put is more than ttl after its last.
	v.apply(entry{"p.a", t0.Add(6 * time.Second), jetstream.KeyValuePut, 0})
	check("p.a", "p.a", "p.b", "p.c")
	v.apply(entry{"p.a", t0.Add(6*time.Second + time.Millisecond), jetstream.KeyValuePut, 0})
	check("p.a", "p.a", "p.c")
	// p.c leaves: its key deleted.
	v.apply(entry{"p.c", t0.Add(7 * time.Second), jetstream.KeyValueDelete, 0})
	check("p.a", "p.a")
	if _, err := v.live("p.z", ttl); err == nil {
		t.Fatal("a replica whose own key is missing got a share")
	}
	// A new watch: nothing is shared until it has delivered its initial values.
	v.restart()
	if _, err := v.live("p.a", ttl); !errors.Is(err, errMembersPending) {
		t.Fatalf("after a restart: %v, want errMembersPending", err)
	}
}
