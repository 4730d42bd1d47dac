package processor

import (
	"container/list"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/metrics"
	"github.com/worldgate/worldgate/shared/textstats"
)

// Diversity measures what committed content looks like to players (#20 item 4). The
// event-processor measures it because it is the one component that sees every proposal that
// became content, and only those: the gates see proposals that are later refused, the
// ai-worker sees its own output before any gate. Labels are bounded (the purpose, n): NPC and
// player ids never become labels; the per-NPC lines behind the stale share live in memory,
// bounded by MaxNPCs (least recently heard NPC forgotten first).
type Diversity struct {
	cfg DiversityConfig

	mu       sync.Mutex
	windows  map[string]*textWindow // purpose → its last texts
	npcs     map[string]*list.Element
	lru      *list.List // of *npcLines, most recently heard first
	stale    int        // NPCs with a full window of lines that are stale
	full     int        // NPCs with a full window of lines
	distinct *prometheus.GaugeVec
	repeats  prometheus.Gauge
	lore     *prometheus.GaugeVec
	staleR   prometheus.Gauge
	tracked  prometheus.Gauge
}

// DiversityConfig sizes the windows. Zero values take the defaults.
type DiversityConfig struct {
	Window     int     // texts per purpose in the sliding window; default 200
	NPCLines   int     // an NPC's last lines judged for staleness; default 8
	StaleBelow float64 // variety (textstats.Variety) of an NPC's last lines under which it is stale; default 0.5
	MaxNPCs    int     // NPCs remembered; default 10000
}

// contentPurposes are the kinds whose text is generated for players; the label values match the
// ai-worker's purposes.
var contentPurposes = map[string]bool{events.KindNPCDialogue: true, events.KindAmbience: true, events.KindQuestSeed: true}

type committedText struct {
	text, words, player string
	lore                bool
	grams               [3][]string // its word n-grams, n = 1, 2
}

// textWindow is a purpose's last texts and what the gauges read of them, kept up to date as a
// text enters and the oldest leaves: a commit costs its own text's n-grams, not the window's.
type textWindow struct {
	items    []committedText
	next     int
	grams    [3]map[string]int         // n → word n-gram → occurrences in the window (n = 1, 2)
	total    [3]int                    // n → n-grams in the window
	grounded int                       // texts with a lore lookup
	said     map[string]map[string]int // words → player → lines
	lines    map[string]int            // words → lines
	repeated int                       // lines whose words were said to more than one player
}

func newTextWindow() *textWindow {
	return &textWindow{grams: [3]map[string]int{nil, {}, {}}, said: map[string]map[string]int{}, lines: map[string]int{}}
}

// count adds (sign +1) or removes (-1) ct's share of the window's figures.
func (w *textWindow) count(ct committedText, sign int) {
	for n := 1; n <= 2; n++ {
		for _, g := range ct.grams[n] {
			if w.grams[n][g] += sign; w.grams[n][g] == 0 {
				delete(w.grams[n], g)
			}
		}
		w.total[n] += sign * len(ct.grams[n])
	}
	if ct.lore {
		w.grounded += sign
	}
	w.repeated -= w.repeatedOf(ct.words)
	if w.said[ct.words] == nil {
		w.said[ct.words] = map[string]int{}
	}
	if w.said[ct.words][ct.player] += sign; w.said[ct.words][ct.player] == 0 {
		delete(w.said[ct.words], ct.player)
	}
	if w.lines[ct.words] += sign; w.lines[ct.words] == 0 {
		delete(w.lines, ct.words)
		delete(w.said, ct.words)
	}
	w.repeated += w.repeatedOf(ct.words)
}

// repeatedOf is how many of the window's lines with these words count as repeated: all of them
// when they were said to more than one player.
func (w *textWindow) repeatedOf(words string) int {
	if len(w.said[words]) > 1 {
		return w.lines[words]
	}
	return 0
}

// distinct is distinct-n over the window (textstats.DistinctN of its texts).
func (w *textWindow) distinct(n int) float64 {
	if w.total[n] == 0 {
		return 0
	}
	return float64(len(w.grams[n])) / float64(w.total[n])
}

type npcLines struct {
	npc   string
	lines []string
	next  int
	stale bool
}

// DefaultDiversity is the configuration the zero value means.
func DefaultDiversity() DiversityConfig {
	return DiversityConfig{Window: 200, NPCLines: 8, StaleBelow: 0.5, MaxNPCs: 10000}
}

func (c DiversityConfig) withDefaults() DiversityConfig {
	d := DefaultDiversity()
	if c.Window <= 0 {
		c.Window = d.Window
	}
	if c.NPCLines <= 0 {
		c.NPCLines = d.NPCLines
	}
	if c.StaleBelow <= 0 {
		c.StaleBelow = d.StaleBelow
	}
	if c.MaxNPCs <= 0 {
		c.MaxNPCs = d.MaxNPCs
	}
	return c
}

// NewDiversity registers the diversity metrics on reg.
func NewDiversity(reg prometheus.Registerer, cfg DiversityConfig) *Diversity {
	cfg = cfg.withDefaults()
	return &Diversity{cfg: cfg, windows: map[string]*textWindow{}, npcs: map[string]*list.Element{}, lru: list.New(),
		distinct: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Name: "content_distinct_ratio",
			Help: "Distinct-n (n = 1, 2) of the words of the last committed texts of a purpose (a sliding window, 200 by default): distinct n-grams / all n-grams; 1 means nothing repeats.",
		}, []string{"purpose", "n"})),
		repeats: metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Name: "dialogue_cross_player_repeat_ratio",
			Help: "Share of the last committed NPC lines (sliding window) whose words were also committed, in the window, as a line to another player.",
		})),
		lore: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Name: "content_lore_grounded_ratio",
			Help: "Lore coverage: share of the last committed texts of a purpose (sliding window) whose provenance shows a lore lookup (an mcp-lore tool call).",
		}, []string{"purpose"})),
		staleR: metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Name: "npc_stale_ratio",
			Help: "Share of the NPCs heard enough (8 lines by default) whose last lines are stale: their distinct-2 (distinct-1 for one-word lines) is under 0.5 by default. worldgate eval -live lists them.",
		})),
		tracked: metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Name: "npcs_heard",
			Help: "NPCs whose last lines the stale share is computed over (bounded by the processor's memory cap).",
		})),
	}
}

// Observe records a committed proposal; kinds that carry no generated text are ignored.
func (d *Diversity) Observe(p *events.Proposal) {
	if d == nil || !contentPurposes[p.Kind] {
		return
	}
	payload, err := events.DecodePayload(p.Kind, p.Payload)
	if err != nil {
		return // committed, so decodable; nothing to measure otherwise
	}
	text := payload.Content()
	if text == "" {
		return
	}
	ct := committedText{text: text, words: strings.Join(textstats.Words(text), " "), lore: loreGrounded(p),
		grams: [3][]string{nil, textstats.NGrams(text, 1), textstats.NGrams(text, 2)}}
	dialogue, _ := payload.(*events.NPCDialoguePayload)
	if dialogue != nil {
		ct.player = dialogue.PlayerID
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.windows[p.Kind]
	if w == nil {
		w = newTextWindow()
		d.windows[p.Kind] = w
	}
	if len(w.items) < d.cfg.Window {
		w.items = append(w.items, ct)
	} else {
		w.count(w.items[w.next], -1)
		w.items[w.next] = ct
		w.next = (w.next + 1) % d.cfg.Window
	}
	w.count(ct, +1)
	d.distinct.WithLabelValues(p.Kind, "1").Set(w.distinct(1))
	d.distinct.WithLabelValues(p.Kind, "2").Set(w.distinct(2))
	d.lore.WithLabelValues(p.Kind).Set(float64(w.grounded) / float64(len(w.items)))
	if dialogue != nil {
		d.repeats.Set(float64(w.repeated) / float64(len(w.items)))
		d.heard(dialogue.NPCID, text)
	}
}

// heard adds an NPC's line and updates the stale share. Called with d.mu held.
func (d *Diversity) heard(npc, line string) {
	var n *npcLines
	if e, ok := d.npcs[npc]; ok {
		d.lru.MoveToFront(e)
		n = e.Value.(*npcLines)
	} else {
		n = &npcLines{npc: npc}
		d.npcs[npc] = d.lru.PushFront(n)
		if d.lru.Len() > d.cfg.MaxNPCs {
			d.forget(d.lru.Back().Value.(*npcLines))
		}
	}
	d.count(n, -1)
	if len(n.lines) < d.cfg.NPCLines {
		n.lines = append(n.lines, line)
	} else {
		n.lines[n.next] = line
		n.next = (n.next + 1) % d.cfg.NPCLines
	}
	n.stale = len(n.lines) == d.cfg.NPCLines && textstats.Variety(n.lines) < d.cfg.StaleBelow
	d.count(n, +1)
	d.tracked.Set(float64(d.lru.Len()))
	if d.full > 0 {
		d.staleR.Set(float64(d.stale) / float64(d.full))
	} else {
		d.staleR.Set(0)
	}
}

func (d *Diversity) count(n *npcLines, sign int) {
	if len(n.lines) == d.cfg.NPCLines {
		d.full += sign
		if n.stale {
			d.stale += sign
		}
	}
}

func (d *Diversity) forget(n *npcLines) {
	d.count(n, -1)
	d.lru.Remove(d.npcs[n.npc])
	delete(d.npcs, n.npc)
}

// loreGrounded reports a lore lookup among the proposal's recorded tool calls.
func loreGrounded(p *events.Proposal) bool {
	if p.Provenance == nil {
		return false
	}
	for _, c := range p.Provenance.ToolCalls {
		if c.Server == "lore" {
			return true
		}
	}
	return false
}
