package scripted

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/worldgate/worldgate/shared/llm"
)

// facts is what the provider "read": key/value hints from the prompt and
// the names, descriptions and directions found in tool results.
type facts struct {
	kv        map[string][]string // normalized key -> values, first seen first
	names     []string            // names of places and things
	npcs      []string            // names of characters
	items     []string            // names of items
	descs     []string            // descriptive sentences
	lore      []string            // lore facts
	dirs      []string            // exit directions
	intents   []string            // classified intents
	moods     []string            // moods mentioned
	utterance string              // the player's words, if any
	lastSaid  string              // what the player said in the previous exchange (conversation memory)
	refusal   string              // why a validator refused the previous answer, on a reprompt
	all       string              // everything, lower-cased, for keyword cues
	hasTool   bool                // tool results were present
}

var (
	kvPattern   = regexp.MustCompile(`"?([A-Za-z_][A-Za-z0-9_\-]*)"?\s*[:=]\s*(?:"([^"\n]{1,160})"|([A-Za-z0-9_.:/\-]+))`)
	quotedLine  = regexp.MustCompile(`(?m)^\s*("(?:[^"\\]|\\.)*")\s*$`)
	labelled    = regexp.MustCompile(`(?m)^<<<DATA label="([^"]*)"[^\n]*\n\s*("(?:[^"\\]|\\.)*")\s*$`)
	nameKeys    = []string{"name", "title", "displayname", "label"}
	descKeys    = []string{"description", "summary", "text", "fact", "content", "details", "body", "snippet", "excerpt"}
	dirKeys     = []string{"direction", "dir"}
	npcContexts = []string{"npc", "character", "people", "resident", "speaker", "actor"}
)

var normReplacer = strings.NewReplacer("_", "", "-", "", " ", "")

// norm folds a key for matching: locationId, location_id and location-id
// are all "locationid".
func norm(k string) string { return normReplacer.Replace(strings.ToLower(k)) }

func gather(req *llm.Request) *facts {
	f := &facts{kv: map[string][]string{}}
	toolNames := map[string]string{}
	var all strings.Builder
	f.text(req.System)
	all.WriteString(req.System)
	for _, m := range req.Messages {
		all.WriteString("\n")
		all.WriteString(m.Content)
		switch m.Role {
		case llm.RoleUser:
			f.text(m.Content)
			if u := dataBlock(m.Content); u != "" {
				f.utterance = u
			}
			for label, v := range labelledBlocks(m.Content) {
				switch label {
				case "player_said", "utterance":
					f.utterance = v
				case "rejection_reason":
					f.refusal = v
				}
			}
		case llm.RoleAssistant:
			for _, c := range m.ToolCalls {
				toolNames[c.ID] = c.Name
			}
		case llm.RoleTool:
			f.hasTool = true
			tool := m.Name
			if tool == "" {
				tool = toolNames[m.ToolCallID]
			}
			var v any
			if m.IsError {
				continue
			}
			if json.Unmarshal([]byte(m.Content), &v) == nil {
				if f.remember(v) {
					continue // a conversation's memory is not a description of the scene
				}
				f.walk(v, []string{norm(tool)})
			} else {
				f.text(m.Content)
				if len(m.Content) > 20 {
					f.addDesc(m.Content, strings.Contains(tool, "lore"))
				}
			}
		}
	}
	f.all = strings.ToLower(all.String())
	return f
}

// dataBlock finds the player's words: a JSON-quoted line on its own, as the
// prompt package renders untrusted data.
func dataBlock(s string) string {
	m := quotedLine.FindAllStringSubmatch(s, -1)
	if len(m) == 0 {
		return ""
	}
	var u string
	if json.Unmarshal([]byte(m[len(m)-1][1]), &u) != nil {
		return ""
	}
	return u
}

// labelledBlocks reads the data blocks the prompt package renders
// (<<<DATA label="…" …, then the JSON-quoted value), by label.
func labelledBlocks(s string) map[string]string {
	out := map[string]string{}
	for _, m := range labelled.FindAllStringSubmatch(s, -1) {
		var v string
		if json.Unmarshal([]byte(m[2]), &v) == nil {
			out[m[1]] = v
		}
	}
	return out
}

func (f *facts) text(s string) {
	for _, m := range kvPattern.FindAllStringSubmatch(s, 64) {
		v := m[2]
		if v == "" {
			v = m[3]
		}
		f.add(norm(m[1]), strings.TrimSpace(v))
	}
}

func (f *facts) add(key, v string) {
	if v == "" || len(v) > 400 {
		return
	}
	if !slices.Contains(f.kv[key], v) {
		f.kv[key] = append(f.kv[key], v)
	}
}

// walk collects hints from a JSON tool result. path holds normalized keys
// from the root (the tool name first), to tell an NPC's name from a place's.
func (f *facts) walk(v any, path []string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		// An object whose kind/label says NPC or Item names one.
		kind := ""
		for _, k := range []string{"kind", "type", "label"} {
			if s, ok := x[k].(string); ok {
				kind = strings.ToLower(s)
			}
		}
		// The object's own fields first, then what is nested in it: a classifier's intent
		// comes before its alternatives' intents, a location's name before its exits'.
		for _, k := range keys {
			if s, ok := x[k].(string); ok {
				nk := norm(k)
				f.leaf(nk, s, append(slices.Clip(path), nk), kind)
			}
		}
		for _, k := range keys {
			if _, ok := x[k].(string); !ok {
				nk := norm(k)
				f.walk(x[k], append(slices.Clip(path), nk))
			}
		}
	case []any:
		for _, e := range x {
			f.walk(e, path)
		}
	case string:
		if len(path) > 0 {
			f.leaf(path[len(path)-1], x, path, "")
		}
	case float64:
		if len(path) > 0 {
			f.add(path[len(path)-1], strconv.FormatFloat(x, 'f', -1, 64))
		}
	}
}

func (f *facts) leaf(key, s string, path []string, kind string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	f.add(key, s)
	under := func(words []string) bool {
		for _, p := range path[:len(path)-1] {
			for _, w := range words {
				if strings.Contains(p, w) {
					return true
				}
			}
		}
		return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(kind, w) })
	}
	switch {
	case slices.Contains(nameKeys, key):
		switch {
		case under(npcContexts):
			addU(&f.npcs, s)
		case under([]string{"item", "inventory"}):
			addU(&f.items, s)
		default:
			addU(&f.names, s)
		}
	case slices.Contains(descKeys, key):
		f.addDesc(s, under([]string{"lore", "fact"}))
	case slices.Contains(dirKeys, key):
		addU(&f.dirs, strings.ToLower(s))
	case key == "intent":
		addU(&f.intents, s)
	case key == "mood":
		addU(&f.moods, strings.ToLower(s))
	case key == "npc" || key == "npcname":
		addU(&f.npcs, s)
	}
}

func (f *facts) addDesc(s string, lore bool) {
	if len(s) < 12 {
		return
	}
	if lore {
		addU(&f.lore, s)
	} else {
		addU(&f.descs, s)
	}
}

func addU(list *[]string, s string) {
	if !slices.Contains(*list, s) {
		*list = append(*list, s)
	}
}

// first returns the first value of any of the keys.
func (f *facts) first(keys ...string) string {
	for _, k := range keys {
		if v := f.kv[norm(k)]; len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// place names where the scene is: a name from the tool results, else a
// humanized location id, else a generic phrase.
func (f *facts) place() string {
	if len(f.names) > 0 {
		return f.names[0]
	}
	if id := f.first("locationId", "location", "locationName", "place"); id != "" {
		return humanize(id)
	}
	return "the crossroads"
}

// humanize turns an id such as "loc:old-mill-2" into "Old Mill".
func humanize(id string) string {
	if i := strings.LastIndexAny(id, ":/"); i >= 0 && i+1 < len(id) {
		id = id[i+1:]
	}
	words := strings.FieldsFunc(id, func(r rune) bool { return r == '-' || r == '_' || r == '.' || r == ' ' })
	out := words[:0]
	for _, w := range words {
		if strings.IndexFunc(w, func(r rune) bool { return !unicode.IsDigit(r) }) < 0 {
			continue // drop numeric suffixes
		}
		rs := []rune(strings.ToLower(w))
		rs[0] = unicode.ToUpper(rs[0])
		out = append(out, string(rs))
	}
	if len(out) == 0 {
		return id
	}
	return strings.Join(out, " ")
}

// stopWords are left out of the subject echoed from the player's words.
var stopWords = map[string]bool{"what": true, "whats": true, "who": true, "where": true, "when": true, "why": true, "how": true,
	"the": true, "a": true, "an": true, "of": true, "to": true, "in": true, "on": true, "at": true, "for": true, "and": true, "or": true,
	"is": true, "are": true, "was": true, "be": true, "do": true, "does": true, "did": true, "you": true, "your": true, "i": true,
	"me": true, "my": true, "we": true, "it": true, "its": true, "have": true, "has": true, "any": true, "some": true, "there": true,
	"this": true, "that": true, "about": true, "tell": true, "news": true, "friend": true, "please": true, "can": true, "could": true,
	"much": true, "many": true, "with": true, "from": true, "good": true, "hello": true, "hi": true, "morning": true, "evening": true}

// subject is what the player asked about, from their words: the longest run (up to three
// words) of content words in the utterance's first sentence, lower-cased ("" when none).
func (f *facts) subject() string {
	said := f.utterance
	if i := strings.IndexAny(said, ".!?"); i > 0 {
		said = said[:i]
	}
	var best, cur []string
	for _, w := range strings.FieldsFunc(strings.ToLower(said), func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' }) {
		w = strings.Trim(w, "'")
		if len(w) < 3 || stopWords[w] {
			cur = nil
			continue
		}
		cur = append(cur, w)
		if len(cur) > 3 {
			cur = cur[1:]
		}
		if len(cur) > len(best) {
			best = slices.Clone(cur)
		}
	}
	if len(best) == 0 {
		return ""
	}
	return "the " + strings.Join(best, " ")
}

// player is how the NPC addresses the player: the name a tool returned for them, else their id
// made readable ("player:ada" → "Ada"), else "".
func (f *facts) player() string {
	id := f.first("playerId", "player")
	if id == "" {
		return ""
	}
	return humanize(id)
}

// remember reads a conversation memory (get-recent-dialogue's result: an
// object with "exchanges", newest first, each with what the player said):
// the player's words in the latest exchange that has any. It reports whether
// v was such a memory.
func (f *facts) remember(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	xs, ok := m["exchanges"].([]any)
	if !ok {
		return false
	}
	for _, x := range xs {
		e, _ := x.(map[string]any)
		if said, _ := e["playerSaid"].(string); strings.TrimSpace(said) != "" && f.lastSaid == "" {
			f.lastSaid = strings.TrimSpace(said)
		}
	}
	return true
}
