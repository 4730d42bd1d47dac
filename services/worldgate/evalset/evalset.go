// Package evalset is the labelled evaluation set of the gates' rules (issue #20 item 3) and the
// runner that grades the invariant, dedup and safety gates on it (Run): the gates are built
// from their registry Specs and checked against real parts (graphd in-process loaded with the
// evaluation world, embedded NATS for dedup's KV bucket, mcp-classify over MCP), so what is
// measured is the decision code the gates run. See README.md for the set, its categories and
// its split. The package writes nothing outside the parts it starts.
//
// It is tooling (`worldgate eval`), not part of the gate service: it starts parts of several
// services (graphd, mcp-classify, the event-processor's graph writes), so it lives under the
// worldgate CLI, the one composition root that may import more than one service.
package evalset

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/mcp-classify/classifytools"
	"github.com/worldgate/worldgate/services/worldgate/worldfile"
)

//go:embed proposals.jsonl
var proposals []byte

//go:embed world.yaml
var world []byte

// The gates the set grades.
const (
	GateInvariant = "invariant"
	GateDedup     = "dedup"
	GateSafety    = "safety"
)

// Expected verdicts.
const (
	Passed   = "passed"
	Rejected = "rejected"
)

// Case is one labelled proposal.
type Case struct {
	ID       string `json:"id"`
	Gate     string `json:"gate"`
	Category string `json:"category"`
	// Accept lists further categories a safety rejection may name for this case (a threat
	// flagged as harassment); Category first.
	Accept  []string        `json:"accept,omitempty"`
	Expect  string          `json:"expect"`
	Kind    string          `json:"kind"`
	Before  []Earlier       `json:"before,omitempty"` // dedup: content accepted earlier
	Payload json.RawMessage `json:"payload"`
	Note    string          `json:"note,omitempty"`
	// HeldOut: the case belongs to the held-out half, which tuning never looks at.
	HeldOut bool `json:"-"`
	// Safety cases: the moderation set the line comes from (SetLabelled, SetOutside) and, for
	// the outside-style set, the language it is written in (ISO 639-1) and its form.
	Source string `json:"-"`
	Lang   string `json:"-"`
	Form   string `json:"-"`
}

// Earlier is content the dedup gate accepted before the case's proposal, AgoMinutes earlier.
type Earlier struct {
	Payload    json.RawMessage `json:"payload"`
	AgoMinutes int             `json:"agoMinutes"`
}

// Set is the evaluation set and the world its invariant cases are checked against.
type Set struct {
	Cases []Case
	World *worldfile.World
}

// HeldOut is the fixed split: the FNV-1a 64-bit hash of key, odd → held-out. The key is a
// case's id, or for the safety cases the sentence (the moderation set's own split, so its
// held-out half stays held out here).
func HeldOut(key string) bool {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return h.Sum64()%2 == 1
}

// Load reads the embedded set, adds the safety cases of the labelled moderation set, and
// checks every case: a known gate and verdict, a category, a payload its kind decodes strictly.
func Load() (*Set, error) {
	w, err := worldfile.Parse("world.yaml", world)
	if err != nil {
		return nil, fmt.Errorf("evaluation world: %w", err)
	}
	s := &Set{World: w}
	if s.Cases, err = readCases("proposals.jsonl", proposals, HeldOut); err != nil {
		return nil, err
	}
	safety, err := safetyCases()
	if err != nil {
		return nil, err
	}
	s.Cases = append(s.Cases, safety...)
	return s, s.check()
}

// readCases decodes the cases of a JSON-lines file strictly (unknown fields refused), one per
// line, each marked held out as heldOut says of its id.
func readCases(name string, data []byte, heldOut func(id string) bool) ([]Case, error) {
	var out []Case
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var c Case
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.DisallowUnknownFields()
		if err := d.Decode(&c); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		c.HeldOut = heldOut(c.ID)
		out = append(out, c)
	}
	return out, sc.Err()
}

// The moderation sets the safety cases come from.
const (
	SetLabelled = "labelled" // classifytools.LabelledModerationSet: the project's own set
	SetOutside  = "outside"  // classifytools.OutsideModerationSet: written from a guide, six languages
)

// The safety cases are lines an NPC says to a player at the fish market.
const (
	safetyNPC, safetyPlayer, safetyLocation = "npc:fenn", "player:rook", "loc:fish-market"
	benign                                  = "benign"
)

// safetyCases turns each line of the labelled and the outside-style moderation sets into an NPC's
// line: the text the safety gate reads. A harmful line must be rejected for its category (or one
// it also accepts). The outside-style set keeps its own split (its held-out file) and languages.
func safetyCases() ([]Case, error) {
	out, err := labelledCases()
	if err != nil {
		return nil, err
	}
	tune, held := classifytools.OutsideModerationSet()
	for _, half := range []struct {
		name    string
		data    []byte
		heldOut bool
	}{{"tune", tune, false}, {"held", held, true}} {
		sc := bufio.NewScanner(bytes.NewReader(half.data))
		for n := 1; sc.Scan(); n++ {
			f := strings.Split(sc.Text(), "\t")
			if len(f) != 4 || f[3] == "" {
				return nil, fmt.Errorf("outside moderation set, %s half, line %d: want labels<TAB>lang<TAB>form<TAB>text", half.name, n)
			}
			c, err := safetyCase(fmt.Sprintf("out-%s-%03d", half.name, n), f[0], f[3])
			if err != nil {
				return nil, err
			}
			c.Source, c.Lang, c.Form, c.HeldOut = SetOutside, f[1], f[2], half.heldOut
			// Hidden characters are refused by the plain-text contract whatever the words say:
			// a harmful line refused as markup is refused for a reason it carries.
			if c.Expect == Rejected && (c.Form == "zerowidth" || c.Form == "bidi") {
				c.Accept = append(c.Accept, "markup_injection")
			}
			out = append(out, c)
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// safetyCase is an NPC's line labelled with a moderation set's labels (the first the category).
func safetyCase(id, labels, text string) (Case, error) {
	accept := strings.Split(labels, ",")
	payload, err := json.Marshal(events.NPCDialoguePayload{NPCID: safetyNPC, PlayerID: safetyPlayer, LocationID: safetyLocation, Line: text, Intent: "chat"})
	if err != nil {
		return Case{}, err
	}
	c := Case{ID: id, Gate: GateSafety, Category: accept[0], Accept: accept,
		Expect: Rejected, Kind: events.KindNPCDialogue, Payload: payload}
	if c.Category == benign {
		c.Expect, c.Accept = Passed, nil
	}
	return c, nil
}

// labelledCases are the labelled moderation set's lines, split by the hash of their text.
func labelledCases() ([]Case, error) {
	var out []Case
	sc := bufio.NewScanner(bytes.NewReader(classifytools.LabelledModerationSet()))
	for n := 1; sc.Scan(); n++ {
		labels, text, ok := strings.Cut(sc.Text(), "\t")
		if !ok || text == "" {
			return nil, fmt.Errorf("labelled moderation set, line %d: want labels<TAB>text", n)
		}
		c, err := safetyCase(fmt.Sprintf("mod-%03d", n), labels, text)
		if err != nil {
			return nil, err
		}
		c.Source, c.HeldOut = SetLabelled, HeldOut(text)
		out = append(out, c)
	}
	return out, sc.Err()
}

func (s *Set) check() error {
	var probs []string
	seen := map[string]bool{}
	for _, c := range s.Cases {
		bad := func(format string, args ...any) {
			probs = append(probs, c.ID+": "+fmt.Sprintf(format, args...))
		}
		if c.ID == "" || seen[c.ID] {
			bad("missing or duplicate id")
		}
		seen[c.ID] = true
		if !slices.Contains([]string{GateInvariant, GateDedup, GateSafety}, c.Gate) {
			bad("unknown gate %q", c.Gate)
		}
		if c.Expect != Passed && c.Expect != Rejected {
			bad("expect must be %q or %q, not %q", Passed, Rejected, c.Expect)
		}
		if c.Category == "" {
			bad("no category")
		}
		if _, err := events.DecodePayload(c.Kind, c.Payload); err != nil {
			bad("payload: %v", err)
		}
		if (c.Gate == GateDedup) != (len(c.Before) > 0) {
			bad("dedup cases, and only they, list the content accepted before them")
		}
		for i, b := range c.Before {
			if _, err := events.DecodePayload(c.Kind, b.Payload); err != nil {
				bad("before[%d]: %v", i, err)
			}
			if b.AgoMinutes < 0 {
				bad("before[%d]: agoMinutes is negative", i)
			}
		}
	}
	if len(probs) > 0 {
		return errors.New("evaluation set: " + strings.Join(probs, "; "))
	}
	return nil
}

// Half selects cases: the tuning half, the held-out half, or both.
type Half int

// Halves.
const (
	Tuning Half = iota
	HeldOutHalf
)

func (h Half) String() string {
	if h == HeldOutHalf {
		return "held-out"
	}
	return "tuning"
}

// Of returns the set's cases of half h.
func (s *Set) Of(h Half) []Case {
	var out []Case
	for _, c := range s.Cases {
		if c.HeldOut == (h == HeldOutHalf) {
			out = append(out, c)
		}
	}
	return out
}
