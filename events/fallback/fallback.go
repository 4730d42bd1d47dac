// Package fallback is the versioned table of static content the ai-worker proposes when it
// cannot produce AI content: a tool server is down, the model failed after the provider
// layer's retries, or the proposal was refused after the last reprompt. The content is
// deliberately plain and safe, and it is chosen deterministically from the entity it is about,
// so the same situation yields the same proposal.
//
// A proposal built from this table records the table's id, version and SHA-256 as its prompt
// template, and why it fell back in provenance.fallback. Changing an entry needs a new version.
//
// The table is a contract between two services, so it lives in the events module below both:
// the ai-worker proposes its content, and the dedup gate recognises it (IsContent) and passes
// it without comparing. It needs nothing but package events.
package fallback

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/worldgate/worldgate/events"
)

// Provider and model recorded in provenance for fallback content.
const (
	Provider = "fallback"
	Model    = "static-table"
)

// Table is one version of the fallback content.
type Table struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	// Ambience: text and mood pairs.
	AmbienceTexts []AmbienceEntry `json:"ambience"`
	// Dialogue: neutral in-character lines with their intent.
	DialogueLines []DialogueEntry `json:"dialogue"`
	// Quests: simple local quests.
	QuestSeeds []QuestEntry `json:"quests"`

	sha sync.Once
	sum string
}

// AmbienceEntry is one ambience text.
type AmbienceEntry struct {
	Text string `json:"text"`
	Mood string `json:"mood"`
}

// DialogueEntry is one dialogue line.
type DialogueEntry struct {
	Line   string `json:"line"`
	Intent string `json:"intent"`
}

// QuestEntry is one quest seed.
type QuestEntry struct {
	Title      string   `json:"title"`
	Hook       string   `json:"hook"`
	Objectives []string `json:"objectives"`
}

var v1 = &Table{
	ID:      "fallback",
	Version: "1.0.0",
	AmbienceTexts: []AmbienceEntry{
		{"The air is still here, and the place seems to be waiting for something to happen.", "calm"},
		{"A faint breeze stirs the dust. Somewhere nearby, a door creaks and falls quiet again.", "quiet"},
		{"Light shifts slowly across the ground as clouds pass overhead.", "calm"},
		{"The sounds of the wider world feel distant here, muffled and unhurried.", "melancholy"},
	},
	DialogueLines: []DialogueEntry{
		{"Hm? Forgive me, traveller, my thoughts were elsewhere. Ask me again later.", "other"},
		{"I have little to say just now. Safe travels.", "farewell"},
		{"Well met. These are quiet days, and I would like to keep them that way.", "greet"},
	},
	QuestSeeds: []QuestEntry{
		{"A Word in the Right Ear", "Folk nearby mention that someone has been asking after travellers. It may be nothing, or the start of something.",
			[]string{"Ask around the area for news", "Find whoever has been asking after travellers"}},
		{"Lost and Found", "A small but treasured belonging has gone missing somewhere close by, and its owner would be grateful for its return.",
			[]string{"Search the surroundings", "Return what was lost to its owner"}},
	},
}

// Default returns the current table.
func Default() *Table { return v1 }

// Text is the table's canonical text (its JSON encoding). It is registered as a prompt
// template (id "fallback"), so the replay gate finds it like any other template.
func (t *Table) Text() string {
	b, _ := json.Marshal(t) // plain data: cannot fail
	return string(b)
}

// SHA256 is the hex SHA-256 of Text: what provenance records.
func (t *Table) SHA256() string {
	t.sha.Do(func() {
		s := sha256.Sum256([]byte(t.Text()))
		t.sum = hex.EncodeToString(s[:])
	})
	return t.sum
}

// Ref is the table's identity as a prompt template reference.
func (t *Table) Ref() events.TemplateRef {
	return events.TemplateRef{ID: t.ID, Version: t.Version, SHA256: t.SHA256()}
}

func pick(key string, n int) int {
	s := sha256.Sum256([]byte(key))
	return int(binary.BigEndian.Uint64(s[:8]) % uint64(n))
}

// ambience returns the fallback ambience payload for a location.
func (t *Table) ambience(locationID string) json.RawMessage {
	e := t.AmbienceTexts[pick(locationID, len(t.AmbienceTexts))]
	return mustJSON(&events.AmbiencePayload{LocationID: locationID, Text: e.Text, Mood: e.Mood})
}

// dialogue returns the fallback dialogue payload.
func (t *Table) dialogue(npcID, playerID, locationID string) json.RawMessage {
	e := t.DialogueLines[pick(npcID+"|"+playerID, len(t.DialogueLines))]
	return mustJSON(&events.NPCDialoguePayload{NPCID: npcID, PlayerID: playerID, LocationID: locationID, Line: e.Line, Intent: e.Intent})
}

// quest returns the fallback quest seed payload with the given quest id.
func (t *Table) quest(questID, locationID string) json.RawMessage {
	e := t.QuestSeeds[pick(locationID, len(t.QuestSeeds))]
	return mustJSON(&events.QuestSeedPayload{QuestID: questID, LocationID: locationID, Title: e.Title, Hook: e.Hook, Objectives: e.Objectives})
}

// Payload returns the fallback payload for kind, with the identifiers taken from bind
// (the ids the trigger fixed: locationId, npcId, playerId, questId).
func (t *Table) Payload(kind string, bind map[string]string) (json.RawMessage, error) {
	need := func(keys ...string) error {
		var missing []string
		for _, k := range keys {
			if bind[k] == "" {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("fallback %s content needs %s", kind, strings.Join(missing, ", "))
		}
		return nil
	}
	switch kind {
	case events.KindAmbience:
		if err := need("locationId"); err != nil {
			return nil, err
		}
		return t.ambience(bind["locationId"]), nil
	case events.KindNPCDialogue:
		if err := need("npcId", "playerId", "locationId"); err != nil {
			return nil, err
		}
		return t.dialogue(bind["npcId"], bind["playerId"], bind["locationId"]), nil
	case events.KindQuestSeed:
		if err := need("questId", "locationId"); err != nil {
			return nil, err
		}
		return t.quest(bind["questId"], bind["locationId"]), nil
	}
	return nil, fmt.Errorf("the fallback table has no content for proposal kind %q", kind)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v) // maps of strings: cannot fail
	return b
}

// IsContent reports whether payload's content (a dialogue line, an ambience text and mood, a
// quest's title, hook and objectives) is an entry of a known version of the fallback table,
// whatever ids it is bound to. The dedup gate passes such content without comparing it:
// fallback content is the answer of last resort, repeated by design (four hostile lines to one
// NPC get the same policy line four times), and refusing it as a near-duplicate would leave the
// player without any answer.
func IsContent(kind string, payload json.RawMessage) bool {
	var f struct {
		Text, Mood, Line, Intent, Title, Hook string
		Objectives                            []string
	}
	if json.Unmarshal(payload, &f) != nil {
		return false
	}
	for _, t := range []*Table{v1} {
		switch kind {
		case events.KindAmbience:
			for _, e := range t.AmbienceTexts {
				if e.Text == f.Text && e.Mood == f.Mood {
					return true
				}
			}
		case events.KindNPCDialogue:
			for _, e := range t.DialogueLines {
				if e.Line == f.Line && e.Intent == f.Intent {
					return true
				}
			}
		case events.KindQuestSeed:
			for _, e := range t.QuestSeeds {
				if e.Title == f.Title && e.Hook == f.Hook && slices.Equal(e.Objectives, f.Objectives) {
					return true
				}
			}
		}
	}
	return false
}
