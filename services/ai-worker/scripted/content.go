package scripted

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"

	"github.com/worldgate/worldgate/services/ai-worker/roles"
	"github.com/worldgate/worldgate/shared/llm"
)

// writer composes content from facts. Its phrase banks are small but
// combinatorial; the rng (seeded from the request) picks among them.
type writer struct {
	rng   *rand.Rand
	f     *facts
	large bool
}

func (w *writer) pick(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[w.rng.IntN(len(list))]
}

// answer writes the final answer for the request's purpose, as JSON for its
// output schema if it has one.
func (w *writer) answer(req *llm.Request) string {
	var sem map[string]any
	switch req.Purpose {
	case roles.PurposeAmbience:
		sem = w.ambience()
	case roles.PurposeNPCDialogue:
		sem = w.dialogue()
	case roles.PurposeQuestSeed:
		sem = w.quest()
	default:
		sem = map[string]any{"text": w.sentences(1 + w.rng.IntN(2))}
	}
	var out any = sem
	if req.Output != nil {
		var schema map[string]any
		if json.Unmarshal(req.Output.Schema, &schema) == nil {
			fl := filler{w: w, sem: semIndex(sem), root: schema}
			out = fl.fill("", schema, 0)
		}
	} else if req.Purpose != roles.PurposeAmbience && req.Purpose != roles.PurposeNPCDialogue && req.Purpose != roles.PurposeQuestSeed {
		return sem["text"].(string)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return `{}`
	}
	return string(b)
}

var (
	moods       = []string{"calm", "tense", "eerie", "melancholy", "festive", "ominous", "cozy", "lively", "desolate", "mysterious"}
	warmWords   = []string{"tavern", "inn", "hearth", "market", "festival", "feast", "fire", "bakery", "music"}
	darkWords   = []string{"crypt", "ruin", "tomb", "dark", "shadow", "cursed", "grave", "blood", "haunt", "abandoned"}
	wildWords   = []string{"forest", "wood", "marsh", "river", "mountain", "cave", "field", "shore", "sea", "hill"}
	openers     = []string{"Lamplight pools across %s", "A low wind threads through %s", "Smoke hangs beneath the rafters of %s", "Rain ticks softly against %s", "%s lies hushed beneath a pale sky", "Dust turns slowly in the light over %s", "The air in %s smells of wet stone and woodsmoke", "Evening settles over %s like a held breath", "Voices rise and fall somewhere in %s", "Frost feathers the corners of %s"}
	openerTails = []string{"", " as the bells fall silent", " while the last light fades", " and nobody seems in a hurry", " as if waiting for something", ""}
	sounds      = []string{"a dog barking twice, then nothing", "the creak of a cart wheel", "laughter that stops too quickly", "the slow drip of water", "a half-remembered song", "footsteps that never come closer", "the clatter of hooves", "wind worrying at loose shutters"}
	asides      = []string{"Old folk still whisper of %s.", "Someone has scratched a mark for %s into the doorframe.", "Few here will speak of %s after dark.", "Talk keeps drifting back to %s."}
)

func cue(all string, words []string) int {
	n := 0
	for _, w := range words {
		n += strings.Count(all, w)
	}
	return n
}

func (w *writer) mood() string {
	if len(w.f.moods) > 0 && w.rng.IntN(3) == 0 {
		return w.f.moods[0]
	}
	dark, warm, wild := cue(w.f.all, darkWords), cue(w.f.all, warmWords), cue(w.f.all, wildWords)
	switch {
	case dark > 0 && dark >= warm && dark >= wild:
		return w.pick([]string{"eerie", "ominous", "tense", "desolate"})
	case warm > 0 && warm >= wild:
		return w.pick([]string{"cozy", "lively", "festive", "calm"})
	case wild > 0:
		return w.pick([]string{"calm", "mysterious", "melancholy", "tense"})
	}
	return w.pick(moods)
}

// fragment is a short clause taken from a description: its first sentence,
// without the final full stop, lower-cased at the start.
func fragment(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, ".!?\n"); i > 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > 140 {
		s = string(r[:140])
		if i := strings.LastIndexByte(s, ' '); i > 60 {
			s = s[:i]
		}
	}
	return s
}

func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	s = string(r)
	if !strings.ContainsAny(s[len(s)-1:], ".!?") {
		s += "."
	}
	return s
}

func (w *writer) sentences(n int) string {
	place := w.f.place()
	out := []string{sentence(strings.Replace(w.pick(openers), "%s", place, 1) + w.pick(openerTails))}
	if n > 1 {
		switch {
		case len(w.f.descs) > 0 && w.rng.IntN(3) > 0:
			out = append(out, sentence("Here, "+lowerFirst(fragment(w.pick(w.f.descs)))))
		case len(w.f.dirs) > 0:
			out = append(out, sentence("From the "+w.pick(w.f.dirs)+" comes "+w.pick(sounds)))
		default:
			out = append(out, sentence("Somewhere near comes "+w.pick(sounds)))
		}
	}
	if n > 2 {
		subject := ""
		switch {
		case len(w.f.lore) > 0:
			subject = lowerFirst(fragment(w.pick(w.f.lore)))
		case len(w.f.npcs) > 0:
			subject = w.pick(w.f.npcs)
		case len(w.f.names) > 1:
			subject = w.f.names[1+w.rng.IntN(len(w.f.names)-1)]
		}
		if subject != "" {
			out = append(out, strings.Replace(w.pick(asides), "%s", subject, 1))
		} else if len(w.f.dirs) > 0 {
			out = append(out, sentence("The way "+w.pick(w.f.dirs)+" stands open"))
		}
	}
	return strings.Join(out, " ")
}

func lowerFirst(s string) string {
	r := []rune(s)
	if len(r) > 1 && unicode.IsUpper(r[0]) && !unicode.IsUpper(r[1]) {
		r[0] = unicode.ToLower(r[0])
	}
	return string(r)
}

func (w *writer) ambience() map[string]any {
	n := 1 + w.rng.IntN(2)
	if w.large {
		n = 2 + w.rng.IntN(2)
	}
	return map[string]any{"text": w.sentences(n), "mood": w.mood()}
}

var intents = []string{"greet", "inform", "warn", "trade", "refuse", "hint_quest"}

// hostile reports whether the player's classified intent is hostile.
func (f *facts) hostile() bool {
	if len(f.intents) == 0 {
		return false
	}
	switch strings.ToLower(f.intents[0]) {
	case "threaten", "hostile", "attack", "insult":
		return true
	}
	return false
}

func (w *writer) dialogue() map[string]any {
	intent := w.pick(intents)
	if len(w.f.intents) > 0 {
		// Answer what the player wanted, in kind.
		switch strings.ToLower(w.f.intents[0]) {
		case "greet", "greeting", "smalltalk", "small_talk":
			intent = w.pick([]string{"greet", "inform"})
		case "trade", "buy", "sell", "barter":
			intent = w.pick([]string{"trade", "refuse"})
		case "threaten", "hostile", "attack", "insult":
			intent = w.pick([]string{"warn", "refuse"})
		case "ask", "question", "ask_info", "inquire", "information":
			intent = w.pick([]string{"inform", "hint_quest"})
		}
	}
	place := w.f.place()
	topic := place
	switch {
	case len(w.f.lore) > 0:
		topic = lowerFirst(fragment(w.pick(w.f.lore)))
	case len(w.f.descs) > 0:
		topic = lowerFirst(fragment(w.pick(w.f.descs)))
	}
	dir := "north"
	if len(w.f.dirs) > 0 {
		dir = w.pick(w.f.dirs)
	}
	someone := "the miller"
	if len(w.f.npcs) > 1 {
		someone = w.f.npcs[1]
	} else if len(w.f.names) > 1 {
		someone = w.f.names[1]
	}
	var line string
	said := strings.TrimSpace(w.f.utterance)
	switch {
	case w.f.hostile() && said != "" && w.f.refusal == "":
		// Like real models, it throws a hostile player's words back at them. When those
		// words break the moderation policy the safety gate refuses the line; the reprompt
		// carries the refusal, and then the model answers without quoting.
		line = fmt.Sprintf(w.pick([]string{"%q? Say that again and the watch hears of it.", "%q, is it? I have heard worse from better.", "You walk in here and tell me %q? Walk on."}), said)
	case intent == "greet":
		line = w.pick([]string{"Well met, traveller. " + place + " doesn't see many new faces these days.", "Ah, a visitor! Welcome to " + place + ". Mind the step.", "Evening. You look like you've walked a long way to reach " + place + "."})
	case intent == "inform":
		line = w.pick([]string{"They say " + topic + ". Make of that what you will.", "If you want my advice, learn this first: " + topic + ".", "Ask anyone in " + place + " and they'll tell you: " + topic + "."})
	case intent == "warn":
		line = w.pick([]string{"Keep off the " + dir + " road after dark. Things walk there that shouldn't.", "I'd not linger here, friend. " + place + " has a long memory.", "Watch yourself. Not everyone in " + place + " is what they seem."})
	case intent == "trade":
		line = w.pick([]string{"I might have something for you, if your coin is good.", "Everything has a price in " + place + ". What are you offering?", "Fresh from the " + dir + " road. Take a look, no touching."})
	case intent == "refuse":
		line = w.pick([]string{"I've nothing to say to you about that.", "Not here. Not now. Walk on.", "You'll get no help from me, stranger."})
	default:
		line = w.pick([]string{"If it's work you want, ask " + someone + " about " + topic + ".", "There's a matter " + dir + " of " + place + " that needs a steady hand.", "Folk say " + topic + ". Someone ought to look into it."})
	}
	// Like a real model, it answers what was said: the player's own subject comes back (never
	// for a hostile player, whose words are not repeated), and who asks changes how it is put.
	if topic := w.f.subject(); topic != "" && !w.f.hostile() && intent != "refuse" {
		line = sentence(strings.Replace(w.pick([]string{"%s, you say?", "Ah, %s.", "%s? Hm.", "So it's %s you're after."}), "%s", topic, 1) + " " + line)
	}
	// Like a model with the conversation's memory, it picks up where the two left off: what
	// the player said last time comes back, quoted (never for a hostile player).
	if before := w.f.lastSaid; before != "" && !w.f.hostile() {
		line = strings.Replace(w.pick([]string{"Last time you said %q. ", "You told me %q, last we spoke. ", "Back again? Last time it was %q. "}),
			"%q", strconvQuote(quoteable(before)), 1) + line
	}
	if who := w.f.player(); who != "" && w.rng.IntN(2) == 0 {
		line += " " + w.pick([]string{"Mind how you go, %s.", "Remember that, %s.", "That's all I know, %s.", "Good day to you, %s."})
		line = strings.Replace(line, "%s", who, 1)
	}
	sem := map[string]any{"line": line, "intent": intent}
	if len(w.f.npcs) > 0 {
		sem["speaker"] = w.f.npcs[0]
	}
	return sem
}

var (
	questAdj  = []string{"Silent", "Broken", "Hollow", "Forgotten", "Ashen", "Crimson", "Lost", "Sleeping", "Drowned", "Last"}
	questNoun = []string{"Bell", "Lantern", "Oath", "Crown", "Well", "Road", "Letter", "Key", "Song", "Map"}
	problems  = []string{"has gone missing", "was found broken at dawn", "is being hunted", "has started speaking in riddles", "never returned from the road", "has been stolen"}
)

func (w *writer) quest() map[string]any {
	place := w.f.place()
	noun := w.pick(questNoun)
	title := w.pick([]string{"The " + w.pick(questAdj) + " " + noun + " of " + place, "The " + w.pick(questAdj) + " " + noun, "Shadows over " + place, "A " + noun + " for " + place})
	who := "A stranger"
	if len(w.f.npcs) > 0 {
		who = w.pick(w.f.npcs)
	}
	hook := who + " in " + place + " says the old " + strings.ToLower(noun) + " " + w.pick(problems) + "."
	if theme := w.f.first("theme"); theme != "" {
		// The requested theme shapes the seed, as a real model's would.
		hook += " " + sentence(w.pick([]string{"It smells of %s", "Folk call it %s", "Some see %s in it", "The talk is all of %s"}))
		hook = strings.Replace(hook, "%s", theme, 1)
	}
	if len(w.f.lore) > 0 {
		hook += " Some connect it to this: " + lowerFirst(fragment(w.pick(w.f.lore))) + "."
	} else if len(w.f.descs) > 0 {
		hook += " " + sentence(fragment(w.pick(w.f.descs)))
	}
	dir := "north"
	if len(w.f.dirs) > 0 {
		dir = w.pick(w.f.dirs)
	}
	cands := []string{
		"Speak with " + who + " in " + place,
		"Follow the " + dir + " road beyond " + place,
		"Find the " + strings.ToLower(noun) + " before the next moon",
		"Learn what became of the " + strings.ToLower(noun),
		"Return to " + place + " with what you found",
	}
	if len(w.f.items) > 0 {
		cands = append(cands, "Recover "+w.pick(w.f.items))
	}
	n := 2 + w.rng.IntN(2)
	if w.large {
		n = 3 + w.rng.IntN(2)
	}
	// Keep the first (meet the quest giver) and last (return) in place;
	// shuffle the middle.
	mid := slices.Clone(cands[1:4])
	mid = append(mid, cands[5:]...)
	w.rng.Shuffle(len(mid), func(i, j int) { mid[i], mid[j] = mid[j], mid[i] })
	objs := []string{cands[0]}
	objs = append(objs, mid[:n-2]...)
	objs = append(objs, cands[4])
	return map[string]any{"title": title, "hook": hook, "objectives": objs}
}

// quoteable is the start of earlier words short enough to quote back: the
// first sentence, at most 80 bytes, cut at a word.
func quoteable(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, ".!?\n"); i > 0 {
		s = s[:i+1]
	}
	if len(s) > 80 {
		s = s[:80]
		if i := strings.LastIndexByte(s, ' '); i > 20 {
			s = s[:i]
		}
		s = strings.ToValidUTF8(s, "") + "…"
	}
	return s
}

// strconvQuote quotes s as the line quotes speech.
func strconvQuote(s string) string { return "\u201c" + s + "\u201d" }
