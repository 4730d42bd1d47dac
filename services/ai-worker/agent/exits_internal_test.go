package agent

import (
	"testing"
	"time"
)

// The exits cache serves an answer only while it hears every committed exit change, within
// its TTL, and never stores an answer fetched across a change it heard or may have missed.
func TestExitsCacheServesOnlyWhatNoChangeCanHaveOutdated(t *testing.T) {
	now := time.Unix(1000, 0)
	watching, epoch := true, uint64(0)
	c := NewExitsCache(time.Minute, func() (bool, uint64) { return watching, epoch }, func() time.Time { return now })
	answer := func() *exitsAnswer { return &exitsAnswer{exits: map[string]string{"north": "loc:b"}} }
	hit := func(loc string) string {
		t.Helper()
		e, miss, _ := c.get(loc)
		if e != nil {
			return "hit"
		}
		return miss
	}
	fill := func(loc string) {
		t.Helper()
		_, _, ticket := c.get(loc)
		c.put(loc, ticket, answer())
	}

	fill("loc:a")
	if got := hit("loc:a"); got != "hit" {
		t.Fatalf("after a fill: %s", got)
	}
	c.Invalidate("loc:a")
	if got := hit("loc:a"); got != missAbsent {
		t.Fatalf("after its exit change: %s, want %s", got, missAbsent)
	}

	// Fetched across a change: not stored.
	_, _, ticket := c.get("loc:a")
	c.Invalidate("loc:other")
	c.put("loc:a", ticket, answer())
	if got := hit("loc:a"); got != missAbsent {
		t.Fatalf("an answer fetched across an exit change was stored: %s", got)
	}

	// The TTL bounds an entry.
	fill("loc:a")
	now = now.Add(time.Minute)
	if got := hit("loc:a"); got != missExpired {
		t.Fatalf("past the TTL: %s, want %s", got, missExpired)
	}

	// A reconnect (the watch's epoch moves) drops everything, and so does a fetch across it.
	fill("loc:a")
	_, _, ticket = c.get("loc:b")
	epoch++
	c.put("loc:b", ticket, answer())
	if got := hit("loc:a"); got != missAbsent || c.len() != 0 {
		t.Fatalf("after a reconnect: %s with %d entries, want %s and none", got, c.len(), missAbsent)
	}

	// Not watching: nothing is served or stored.
	fill("loc:a")
	watching = false
	if got := hit("loc:a"); got != missUnwatched {
		t.Fatalf("while not watching: %s, want %s", got, missUnwatched)
	}
	fill("loc:c")
	watching = true
	if got := hit("loc:c"); got != missAbsent {
		t.Fatalf("an answer fetched while not watching was stored: %s", got)
	}

	// No watch at all: no cache.
	none := NewExitsCache(0, nil, nil)
	_, _, ticket = none.get("loc:a")
	none.put("loc:a", ticket, answer())
	if e, miss, _ := none.get("loc:a"); e != nil || miss != missUnwatched {
		t.Fatalf("a cache without a watch served %v (%s)", e, miss)
	}
}
