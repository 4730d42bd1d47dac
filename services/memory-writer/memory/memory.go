// Package memory is Worldgate's short-term interaction memory: per NPC–player pair, the last
// exchanges that were committed (what the player said, as the input rail left it, and what the
// NPC answered), and per NPC a short list of the recent committed events around it. It lives
// in a NATS KV bucket (natsx.BucketMemory) with a TTL and a size bound, beside the canonical
// graph: it is a cache of the COMMITTED log, never a source of truth.
//
// Writer (this file's Record) is fed only from committed domain events (the memory-writer's
// consumer on COMMITTED), never from proposals; mcp-world's get-recent-dialogue reads it. The
// records are bounded here (Limits) so a record never outgrows the bucket's value size,
// whatever the players say or how long they talk.
package memory

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Limits bound each record; the zero value is DefaultLimits.
type Limits struct {
	// Exchanges kept per NPC–player pair (oldest dropped first); default 20.
	Exchanges int
	// Notes kept per NPC (recent events around it); default 10.
	Notes int
	// TextLen bounds each kept text in bytes (a longer one is cut at a rune boundary with
	// "…"); default 500, the contract's bound on a line.
	TextLen int
}

// DefaultLimits are the bounds the memory-writer and the dev stack use.
var DefaultLimits = Limits{Exchanges: 20, Notes: 10, TextLen: 500}

func (l Limits) withDefaults() Limits {
	l.Exchanges = cmp.Or(max(l.Exchanges, 0), DefaultLimits.Exchanges)
	l.Notes = cmp.Or(max(l.Notes, 0), DefaultLimits.Notes)
	l.TextLen = cmp.Or(max(l.TextLen, 0), DefaultLimits.TextLen)
	return l
}

// Exchange is one committed NPC line and the player's words it answered.
type Exchange struct {
	// EventID is the committed domain event's id: a redelivered event is recorded once.
	EventID    string    `json:"eventId"`
	At         time.Time `json:"at" jsonschema:"when the line was committed"`
	LocationID string    `json:"locationId,omitempty"`
	PlayerSaid string    `json:"playerSaid,omitempty" jsonschema:"what the player said, personal data redacted; empty when the input rail blocked it"`
	NPCLine    string    `json:"npcLine" jsonschema:"what the NPC answered"`
	Intent     string    `json:"intent,omitempty"`
}

// Dialogue is one NPC–player pair's record: exchanges oldest first.
type Dialogue struct {
	NPCID     string     `json:"npcId"`
	PlayerID  string     `json:"playerId"`
	Exchanges []Exchange `json:"exchanges"`
}

// Note is one committed event around an NPC.
type Note struct {
	EventID string    `json:"eventId"`
	At      time.Time `json:"at"`
	Type    string    `json:"type" jsonschema:"the domain event type, e.g. NPCDialogueAccepted"`
	Text    string    `json:"text" jsonschema:"a one-line summary"`
}

// Summary is one NPC's recent events, oldest first.
type Summary struct {
	NPCID string `json:"npcId"`
	Notes []Note `json:"notes"`
}

// Add is the pure rule: d with e recorded (in commit order, at most l.Exchanges kept, texts
// cut to l.TextLen), and false when e was recorded before.
func (d Dialogue) Add(e Exchange, l Limits) (Dialogue, bool) {
	l = l.withDefaults()
	if slices.ContainsFunc(d.Exchanges, func(x Exchange) bool { return x.EventID == e.EventID }) {
		return d, false
	}
	e.PlayerSaid, e.NPCLine = cut(e.PlayerSaid, l.TextLen), cut(e.NPCLine, l.TextLen)
	xs := append(slices.Clone(d.Exchanges), e)
	slices.SortStableFunc(xs, func(a, b Exchange) int { return a.At.Compare(b.At) })
	if len(xs) > l.Exchanges {
		xs = xs[len(xs)-l.Exchanges:]
	}
	d.Exchanges = xs
	return d, true
}

// Add is Dialogue.Add for an NPC's notes.
func (s Summary) Add(n Note, l Limits) (Summary, bool) {
	l = l.withDefaults()
	if slices.ContainsFunc(s.Notes, func(x Note) bool { return x.EventID == n.EventID }) {
		return s, false
	}
	n.Text = cut(n.Text, l.TextLen)
	ns := append(slices.Clone(s.Notes), n)
	slices.SortStableFunc(ns, func(a, b Note) int { return a.At.Compare(b.At) })
	if len(ns) > l.Notes {
		ns = ns[len(ns)-l.Notes:]
	}
	s.Notes = ns
	return s, true
}

// Last returns the newest n exchanges, newest first.
func (d Dialogue) Last(n int) []Exchange {
	out := make([]Exchange, 0, min(n, len(d.Exchanges)))
	for i := len(d.Exchanges) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, d.Exchanges[i])
	}
	return out
}

// Last returns the newest n notes, newest first.
func (s Summary) Last(n int) []Note {
	out := make([]Note, 0, min(n, len(s.Notes)))
	for i := len(s.Notes) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, s.Notes[i])
	}
	return out
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:max(n-len("…"), 0)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// Updates is what one committed event changes: the pair's dialogue (nil: none) and the notes
// of the NPCs it concerns.
type Updates struct {
	Dialogue *struct {
		NPCID, PlayerID string
		Exchange        Exchange
	}
	Notes map[string]Note // by NPC id
}

// FromCommitted is the pure rule for what a committed domain event adds to the memory. An
// event whose payload does not decode for its kind is an error (the writer dead-letters it).
func FromCommitted(evt events.DomainEvent) (Updates, error) {
	var u Updates
	if evt.Kind == "" {
		return u, nil // not a proposal's event: nothing to remember
	}
	if err := events.ValidatePayload(evt.Kind, evt.Payload); err != nil {
		return u, fmt.Errorf("%w: committed %s event %s: %v", errPayload, evt.Kind, evt.EventID, err)
	}
	p, err := events.DecodePayload(evt.Kind, evt.Payload)
	if err != nil {
		return u, fmt.Errorf("%w: committed %s event %s: %v", errPayload, evt.Kind, evt.EventID, err)
	}
	at := evt.CommittedUTC.UTC()
	text := strings.Join(strings.Fields(p.Content()), " ")
	if d, ok := p.(*events.NPCDialoguePayload); ok {
		u.Dialogue = &struct {
			NPCID, PlayerID string
			Exchange        Exchange
		}{d.NPCID, d.PlayerID, Exchange{EventID: evt.EventID, At: at, LocationID: d.LocationID, PlayerSaid: d.PlayerSaid, NPCLine: d.Line, Intent: d.Intent}}
		text = fmt.Sprintf("said to %s: %q", d.PlayerID, d.Line)
	}
	for _, id := range append(p.References(), p.Creates()) {
		if !strings.HasPrefix(id, "npc:") {
			continue
		}
		if u.Notes == nil {
			u.Notes = map[string]Note{}
		}
		u.Notes[id] = Note{EventID: evt.EventID, At: at, Type: evt.Type, Text: text}
	}
	return u, nil
}

// Key names.
const (
	pairPrefix = "pair."
	npcPrefix  = "npc."
)

func hashID(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:10])
}

// PairKey is where an NPC–player pair's dialogue lives (ids hashed: they may hold any
// character a key may not).
func PairKey(npcID, playerID string) string {
	return pairPrefix + hashID(npcID) + "." + hashID(playerID)
}

// NPCKey is where an NPC's notes live.
func NPCKey(npcID string) string { return npcPrefix + hashID(npcID) }

// errPayload: a committed event's payload does not decode for its kind (no retry fixes it).
var errPayload = errors.New("undecodable payload")

// ErrFull means the bucket is at its size bound and refused a write.
var ErrFull = errors.New("the interaction memory bucket is full")

// Store reads and writes the memory bucket.
type Store struct {
	kv     jetstream.KeyValue
	limits Limits
}

// Open returns the store on the provisioned bucket.
func Open(ctx context.Context, js jetstream.JetStream, l Limits) (*Store, error) {
	if js == nil {
		return nil, errors.New("memory: JetStream is required")
	}
	kv, err := js.KeyValue(ctx, natsx.BucketMemory)
	if err != nil {
		return nil, fmt.Errorf("KV bucket %s: %w (provision the topology first)", natsx.BucketMemory, err)
	}
	return &Store{kv: kv, limits: l.withDefaults()}, nil
}

// Limits are the store's record bounds.
func (s *Store) Limits() Limits { return s.limits }

// Dialogue reads a pair's record (empty when none).
func (s *Store) Dialogue(ctx context.Context, npcID, playerID string) (Dialogue, error) {
	d := Dialogue{NPCID: npcID, PlayerID: playerID, Exchanges: []Exchange{}}
	_, err := s.get(ctx, PairKey(npcID, playerID), &d)
	return d, err
}

// Summary reads an NPC's notes (empty when none).
func (s *Store) Summary(ctx context.Context, npcID string) (Summary, error) {
	sm := Summary{NPCID: npcID, Notes: []Note{}}
	_, err := s.get(ctx, NPCKey(npcID), &sm)
	return sm, err
}

func (s *Store) get(ctx context.Context, key string, v any) (uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read interaction memory: %w", err)
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		// An unreadable record is replaced, never served: memory is a cache of COMMITTED.
		return e.Revision(), nil
	}
	return e.Revision(), nil
}

// Record applies what a committed event adds, with compare-and-set per record (replicas of
// the writer may record concurrently). It returns how many records changed; a redelivered
// event changes none.
func (s *Store) Record(ctx context.Context, evt events.DomainEvent) (int, error) {
	u, err := FromCommitted(evt)
	if err != nil {
		return 0, err
	}
	changed := 0
	if d := u.Dialogue; d != nil {
		ok, err := update(ctx, s, PairKey(d.NPCID, d.PlayerID), func(r *Dialogue) bool {
			r.NPCID, r.PlayerID = d.NPCID, d.PlayerID
			next, ok := r.Add(d.Exchange, s.limits)
			*r = next
			return ok
		})
		if err != nil {
			return changed, err
		}
		if ok {
			changed++
		}
	}
	npcs := make([]string, 0, len(u.Notes))
	for id := range u.Notes {
		npcs = append(npcs, id)
	}
	slices.Sort(npcs)
	for _, id := range npcs {
		ok, err := update(ctx, s, NPCKey(id), func(r *Summary) bool {
			r.NPCID = id
			next, ok := r.Add(u.Notes[id], s.limits)
			*r = next
			return ok
		})
		if err != nil {
			return changed, err
		}
		if ok {
			changed++
		}
	}
	return changed, nil
}

// update reads the record at key, lets change modify it and writes it back if change reports
// a change, retrying when another writer got there first.
func update[T any](ctx context.Context, s *Store, key string, change func(*T) bool) (bool, error) {
	for range 50 {
		var rec T
		rev, err := s.get(ctx, key, &rec)
		if err != nil {
			return false, err
		}
		if !change(&rec) {
			return false, nil
		}
		raw, err := json.Marshal(rec)
		if err != nil {
			return false, err
		}
		if rev == 0 {
			_, err = s.kv.Create(ctx, key, raw)
		} else {
			_, err = s.kv.Update(ctx, key, raw, rev)
		}
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue
		case isFull(err):
			return false, fmt.Errorf("%w (%s): %v", ErrFull, natsx.BucketMemory, err)
		default:
			return false, fmt.Errorf("write interaction memory: %w", err)
		}
	}
	return false, errors.New("write interaction memory: too many concurrent writers of one record")
}

// isFull reports the server's refusal of a write past the bucket's MaxBytes.
func isFull(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "maximum bytes exceeded") || strings.Contains(s, "resource limits exceeded") || strings.Contains(s, "insufficient resources")
}
