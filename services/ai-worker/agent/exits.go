package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/provenance"
)

// DefaultExitsTTL bounds how long a cached list-exits answer is used when no committed exit
// change has dropped it: a backstop should a change notice be lost in a way the watch cannot
// see.
const DefaultExitsTTL = time.Minute

// Reasons of worldgate_ai_exits_cache_misses_total: why a move asked mcp-world.
const (
	missAbsent    = "absent"    // no answer cached for the location
	missExpired   = "expired"   // the cached answer outlived the TTL
	missRecheck   = "recheck"   // the cached answer lacks the direction: asked again before refusing
	missUnwatched = "unwatched" // committed exit changes are not being received: nothing is cached
)

// ExitsWatch tells the exits cache whether it hears every committed exit change: ok is false
// while it cannot (disconnected), and epoch changes whenever some may have been missed (a
// reconnect, a dropped message). aiworker's watch on world.committed.exit* implements it.
type ExitsWatch func() (ok bool, epoch uint64)

// ExitsCache keeps mcp-world's list-exits answers per location for the world-rules agent, so a
// move does not pay an MCP round trip. The tool stays the source: an entry is its recorded
// answer (same server, arguments and result hashes in the proposal's provenance). An entry is
// dropped when a committed exit change names its location (Invalidate), every entry when
// changes may have been missed (the watch's epoch moves), and an entry is not used past its TTL.
//
// Only one kind of staleness can remain, and it is harmless: an exit removed a moment ago
// still listed. The invariant gate checks the exit against the graph and refuses the move. An
// answer lacking the requested direction is never trusted: resolveMove asks again before it
// refuses, so a cached answer never refuses a move the world allows.
type ExitsCache struct {
	ttl   time.Duration
	now   func() time.Time
	watch ExitsWatch

	mu      sync.Mutex
	epoch   uint64
	gen     uint64 // moves on every invalidation: an answer fetched across one is not stored
	entries map[string]*exitsAnswer

	flight singleflight.Group // list-exits calls in flight, by location
}

// exitsAnswer is one list-exits answer with what every proposal built from it records.
type exitsAnswer struct {
	call   events.ToolCall // the provenance record (Server, Tool, ArgsHash, ResultHash, Result)
	exits  map[string]string
	stored time.Time
	cached bool // served from the cache
}

// to returns where the exit in direction dir leads ("" when there is none).
func (e *exitsAnswer) to(dir string) string { return e.exits[dir] }

// NewExitsCache returns a cache whose entries live ttl (DefaultExitsTTL when ≤ 0) and are
// used only while watch reports it hears the committed exit changes. A nil watch caches
// nothing: without change notices an answer could refuse nothing, but could let a
// removed exit be proposed for a whole TTL.
func NewExitsCache(ttl time.Duration, watch ExitsWatch, now func() time.Time) *ExitsCache {
	if ttl <= 0 {
		ttl = DefaultExitsTTL
	}
	if now == nil {
		now = time.Now
	}
	return &ExitsCache{ttl: ttl, now: now, watch: watch, entries: map[string]*exitsAnswer{}}
}

// Invalidate drops the answer for location, after a committed change of its exits.
func (c *ExitsCache) Invalidate(location string) {
	c.mu.Lock()
	c.gen++
	delete(c.entries, location)
	c.mu.Unlock()
}

// Flush drops every answer (a change notice could not be read).
func (c *ExitsCache) Flush() {
	c.mu.Lock()
	c.flushLocked()
	c.mu.Unlock()
}

func (c *ExitsCache) flushLocked() {
	c.gen++
	clear(c.entries)
}

// sync flushes when the watch may have missed a change since the last look; it reports
// whether answers may be used and stored now.
func (c *ExitsCache) syncLocked() bool {
	if c.watch == nil {
		return false
	}
	ok, epoch := c.watch()
	if epoch != c.epoch {
		c.epoch = epoch
		c.flushLocked()
	}
	return ok
}

// get returns the live answer for location, or the reason there is none; ticket is to be
// given to put with an answer fetched now.
func (c *ExitsCache) get(location string) (e *exitsAnswer, miss string, ticket uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.syncLocked() {
		return nil, missUnwatched, c.gen
	}
	e, found := c.entries[location]
	switch {
	case !found:
		return nil, missAbsent, c.gen
	case c.now().Sub(e.stored) >= c.ttl:
		delete(c.entries, location)
		return nil, missExpired, c.gen
	}
	return e, "", c.gen
}

// put stores an answer fetched after get handed out ticket, unless a change was heard (or may
// have been missed) in between: that answer may predate it.
func (c *ExitsCache) put(location string, ticket uint64, e *exitsAnswer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.syncLocked() || c.gen != ticket {
		return
	}
	e.stored = c.now()
	c.entries[location] = e
}

// len is the number of answers held (for tests).
func (c *ExitsCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// listExits answers which exits location has: from the cache unless fresh is set, else from
// mcp-world (the answer is then cached). The answer's cached field tells which. Lookups that
// miss while an answer for their location is being fetched wait for that answer instead of
// calling mcp-world too: under load a location's first moves (after a start, an exit change or
// the TTL) arrived together, and each called list-exits (bench: 475 calls for 2,500 moves over
// two locations).
func (a *Agent) listExits(ctx context.Context, location string, fresh bool) (*exitsAnswer, error) {
	c := a.cfg.Exits
	if c == nil {
		return a.fetchExits(ctx, location)
	}
	e, miss, ticket := c.get(location)
	switch {
	case e != nil && !fresh:
		a.m.exitsHits.Inc()
		return &exitsAnswer{call: e.call, exits: e.exits, stored: e.stored, cached: true}, nil
	case fresh:
		miss = missRecheck
	}
	key := location
	if fresh {
		key = "fresh\x00" + location // a recheck shares only another recheck's call
	}
	fetched := false // this lookup made the call (the others in flight share its answer)
	v, err, _ := c.flight.Do(key, func() (any, error) {
		fetched = true
		e, err := a.fetchExits(ctx, location)
		if err != nil {
			return nil, err
		}
		c.put(location, ticket, e)
		return e, nil
	})
	if !fetched && err == nil {
		a.m.exitsHits.Inc() // answered by another move's call: this one asked nothing
		e = v.(*exitsAnswer)
		return &exitsAnswer{call: e.call, exits: e.exits, stored: e.stored, cached: true}, nil
	}
	a.m.exitsMisses.WithLabelValues(miss).Inc()
	if err != nil {
		return nil, err
	}
	return v.(*exitsAnswer), nil
}

// fetchExits calls list-exits and prepares its answer for provenance and lookups.
func (a *Agent) fetchExits(ctx context.Context, location string) (*exitsAnswer, error) {
	args := map[string]any{"locationId": location}
	res, err := a.cfg.Tools.Call(ctx, "list-exits", args)
	if err != nil {
		return nil, err
	}
	var out exitsResult
	if err := res.Decode(&out); err != nil {
		return nil, fmt.Errorf("list-exits answered something unreadable: %w", err)
	}
	ah, err := provenance.ArgsHash(args)
	if err != nil {
		return nil, err
	}
	rh, err := provenance.ResultHash(res.Structured)
	if err != nil {
		return nil, err
	}
	e := &exitsAnswer{call: events.ToolCall{Server: res.Server, Tool: "list-exits", ArgsHash: ah, ResultHash: rh, Result: res.Structured},
		exits: make(map[string]string, len(out.Exits))}
	for _, x := range out.Exits {
		d := strings.ToLower(x.Direction)
		if _, dup := e.exits[d]; !dup { // the first listed wins, as the linear search did
			e.exits[d] = x.To
		}
	}
	return e, nil
}
