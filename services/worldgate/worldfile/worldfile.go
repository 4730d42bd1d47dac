// Package worldfile reads Worldgate's world file format (YAML: locations with their exits,
// factions, NPCs, players, items and lore facts) and turns a world into proposals, so that
// seeding a world travels the same pipeline as every other change and the event-processor
// stays the only writer of the graph.
//
//	name: ashfall                 # optional; defaults to the file's base name
//	locations:
//	  - id: loc:gate
//	    name: The Ash Gate
//	    description: …
//	    region: ashfall
//	    tags: [city, wall]
//	    exits:
//	      - {direction: north, to: loc:market, back: south}   # back adds the reverse exit
//	factions:  [{id: faction:wardens, name: …, description: …}]
//	npcs:      [{id: npc:mara, name: …, persona: …, mood: …, location: loc:gate, faction: faction:wardens, rank: captain}]
//	players:   [{id: player:ana, name: Ana, location: loc:gate}]
//	items:     [{id: item:key, name: …, description: …, location: loc:gate}]   # or holder: npc:…/player:…
//	lore:      [{id: lore:wall, title: …, text: …, tags: […], canonical: true, about: [loc:gate]}]
//
// Parsing is strict: an unknown field, a duplicate id, a reference to an entity the file does
// not define, two exits of one location in the same direction, or a field its proposal schema
// refuses is an error naming the line. The format's JSON Schema is schemas/v1/world.json (for
// editors and other languages; TestWorldFileSchema keeps it and this package in step); the game
// team's guide is docs/integrate.md. The package does no I/O beyond what it is given.
package worldfile

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/worldgate/worldgate/events"
)

// World is a parsed world file.
type World struct {
	Name      string     `yaml:"name"`
	Locations []Location `yaml:"locations"`
	Factions  []Faction  `yaml:"factions"`
	NPCs      []NPC      `yaml:"npcs"`
	Players   []Player   `yaml:"players"`
	Items     []Item     `yaml:"items"`
	Lore      []Lore     `yaml:"lore"`
}

// Location is a place; its exits lead to other locations of the file.
type Location struct {
	ID          string   `yaml:"id"`
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Region      string   `yaml:"region"`
	Tags        []string `yaml:"tags"`
	Exits       []Exit   `yaml:"exits"`
	Line        int      `yaml:"-"`
}

// Exit leads from its location to To in Direction; Back, if set, adds the reverse exit.
type Exit struct {
	Direction   string `yaml:"direction"`
	To          string `yaml:"to"`
	Description string `yaml:"description"`
	Back        string `yaml:"back"`
	Line        int    `yaml:"-"`
}

// Faction is a group NPCs belong to.
type Faction struct {
	ID          string `yaml:"id"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Line        int    `yaml:"-"`
}

// NPC is a non-player character at a location, optionally in a faction.
type NPC struct {
	ID       string `yaml:"id"`
	Name     string `yaml:"name"`
	Persona  string `yaml:"persona"`
	Mood     string `yaml:"mood"`
	Location string `yaml:"location"`
	Faction  string `yaml:"faction"`
	Rank     string `yaml:"rank"`
	Line     int    `yaml:"-"`
}

// Player is a player character at a location.
type Player struct {
	ID       string `yaml:"id"`
	Name     string `yaml:"name"`
	Location string `yaml:"location"`
	Line     int    `yaml:"-"`
}

// Item lies at a location or is held by an NPC or player.
type Item struct {
	ID          string `yaml:"id"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Location    string `yaml:"location"`
	Holder      string `yaml:"holder"`
	Line        int    `yaml:"-"`
}

// Lore is a curated fact, optionally about entities of the file.
type Lore struct {
	ID        string   `yaml:"id"`
	Title     string   `yaml:"title"`
	Text      string   `yaml:"text"`
	Tags      []string `yaml:"tags"`
	Canonical bool     `yaml:"canonical"`
	About     []string `yaml:"about"`
	Line      int      `yaml:"-"`
}

// Error lists everything wrong with a world file, each with its line.
type Error struct {
	File     string
	Problems []Problem
}

// Problem is one thing wrong at a line (0 when unknown).
type Problem struct {
	Line    int
	Message string
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Line > 0 {
			parts[i] = fmt.Sprintf("%s:%d: %s", e.File, p.Line, p.Message)
		} else {
			parts[i] = fmt.Sprintf("%s: %s", e.File, p.Message)
		}
	}
	return strings.Join(parts, "\n")
}

var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// Parse reads a world file. file names it in errors and, without a name field, names the world.
func Parse(file string, data []byte) (*World, error) {
	werr := &Error{File: file}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var w World
	if err := dec.Decode(&w); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, msg := range te.Errors {
				werr.Problems = append(werr.Problems, yamlProblem(msg))
			}
		} else {
			werr.Problems = append(werr.Problems, yamlProblem(err.Error()))
		}
		return nil, werr
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err == nil {
		attachLines(&w, &root)
	}
	if w.Name == "" {
		base := filepath.Base(file)
		w.Name = strings.TrimSuffix(base, filepath.Ext(base))
	}
	w.Name = sanitize(w.Name)
	werr.Problems = append(werr.Problems, w.check()...)
	if len(werr.Problems) > 0 {
		return nil, werr
	}
	return &w, nil
}

func yamlProblem(msg string) Problem {
	msg = strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1]) // yamlLine matched digits
		return Problem{Line: n, Message: strings.Replace(m[2], "not found in type worldfile.", "is not a field of ", 1)}
	}
	return Problem{Message: msg}
}

// attachLines records the line of every entity (and exit) from the node tree.
func attachLines(w *World, root *yaml.Node) {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return
	}
	top := root.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		seq := top.Content[i+1]
		if seq.Kind != yaml.SequenceNode {
			continue
		}
		for j, item := range seq.Content {
			switch top.Content[i].Value {
			case "locations":
				if j < len(w.Locations) {
					w.Locations[j].Line = item.Line
					if exits := mapValue(item, "exits"); exits != nil {
						for k, x := range exits.Content {
							if k < len(w.Locations[j].Exits) {
								w.Locations[j].Exits[k].Line = x.Line
							}
						}
					}
				}
			case "factions":
				if j < len(w.Factions) {
					w.Factions[j].Line = item.Line
				}
			case "npcs":
				if j < len(w.NPCs) {
					w.NPCs[j].Line = item.Line
				}
			case "players":
				if j < len(w.Players) {
					w.Players[j].Line = item.Line
				}
			case "items":
				if j < len(w.Items) {
					w.Items[j].Line = item.Line
				}
			case "lore":
				if j < len(w.Lore) {
					w.Lore[j].Line = item.Line
				}
			}
		}
	}
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

func sanitize(name string) string {
	s := strings.Trim(nonName.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if s == "" {
		s = "world"
	}
	return s
}

// check finds the semantic problems: duplicate ids, dangling references, exit clashes.
func (w *World) check() []Problem {
	var probs []Problem
	bad := func(line int, format string, a ...any) {
		probs = append(probs, Problem{Line: line, Message: fmt.Sprintf(format, a...)})
	}
	ids := map[string]int{}
	define := func(id string, line int, prefix string) {
		if !strings.HasPrefix(id, prefix) {
			bad(line, "id %q must start with %q", id, prefix)
		}
		if prev, ok := ids[id]; ok {
			bad(line, "id %s is already defined on line %d", id, prev)
			return
		}
		ids[id] = line
	}
	for _, l := range w.Locations {
		define(l.ID, l.Line, "loc:")
	}
	for _, f := range w.Factions {
		define(f.ID, f.Line, "faction:")
	}
	for _, n := range w.NPCs {
		define(n.ID, n.Line, "npc:")
	}
	for _, p := range w.Players {
		define(p.ID, p.Line, "player:")
	}
	for _, it := range w.Items {
		define(it.ID, it.Line, "item:")
	}
	for _, l := range w.Lore {
		define(l.ID, l.Line, "lore:")
	}
	ref := func(line int, what, id, prefix string) {
		if id == "" {
			bad(line, "%s is required", what)
			return
		}
		if _, ok := ids[id]; !ok || !strings.HasPrefix(id, prefix) {
			bad(line, "%s %s is not defined in this file", what, id)
		}
	}
	type key struct{ from, dir string }
	exits := map[key]int{}
	addExit := func(line int, from, dir, to string) {
		k := key{from, dir}
		if prev, ok := exits[k]; ok {
			bad(line, "%s already has an exit %s (line %d)", from, dir, prev)
			return
		}
		exits[k] = line
		if from == to {
			bad(line, "exit %s of %s leads back to itself", dir, from)
		}
	}
	for _, l := range w.Locations {
		for _, x := range l.Exits {
			ref(x.Line, "exit "+x.Direction+" destination", x.To, "loc:")
			addExit(x.Line, l.ID, x.Direction, x.To)
			if x.Back != "" {
				addExit(x.Line, x.To, x.Back, l.ID)
			}
		}
	}
	for _, n := range w.NPCs {
		ref(n.Line, "location of "+n.ID, n.Location, "loc:")
		if n.Faction != "" {
			ref(n.Line, "faction of "+n.ID, n.Faction, "faction:")
		}
	}
	for _, p := range w.Players {
		ref(p.Line, "location of "+p.ID, p.Location, "loc:")
	}
	for _, it := range w.Items {
		if it.Location != "" && it.Holder != "" {
			bad(it.Line, "item %s has both a location and a holder: give one", it.ID)
		}
		if it.Location != "" {
			ref(it.Line, "location of "+it.ID, it.Location, "loc:")
		}
		if it.Holder != "" {
			if !strings.HasPrefix(it.Holder, "npc:") && !strings.HasPrefix(it.Holder, "player:") {
				bad(it.Line, "holder of %s must be an npc: or player: id", it.ID)
			} else {
				ref(it.Line, "holder of "+it.ID, it.Holder, "")
			}
		}
	}
	for _, l := range w.Lore {
		for _, a := range l.About {
			ref(l.Line, "subject of "+l.ID, a, "")
		}
	}
	// Every proposal the world becomes must pass its schema; report failures at their line.
	if len(probs) == 0 {
		for _, d := range w.drafts() {
			if err := events.ValidatePayload(d.kind, d.payload); err != nil {
				bad(d.line, "%s %s: %v", d.kind, d.entity, err)
			}
		}
	}
	return probs
}

type draft struct {
	kind, entity string
	line         int
	payload      []byte
}

// drafts lists the world's proposal payloads in apply order: factions and locations first,
// then what references them.
func (w *World) drafts() []draft {
	var out []draft
	add := func(kind, entity string, line int, payload events.Payload) {
		raw, _ := json.Marshal(payload) // strings, lists of strings and a bool: cannot fail
		out = append(out, draft{kind: kind, entity: entity, line: line, payload: raw})
	}
	for _, f := range w.Factions {
		add(events.KindFactionCreated, f.ID, f.Line, &events.FactionCreatedPayload{FactionID: f.ID, Name: f.Name, Description: f.Description})
	}
	for _, l := range w.Locations {
		add(events.KindLocationCreated, l.ID, l.Line, &events.LocationCreatedPayload{LocationID: l.ID, Name: l.Name, Description: l.Description, Region: l.Region, Tags: l.Tags})
	}
	for _, l := range w.Locations {
		for _, x := range l.Exits {
			add(events.KindExitAdded, l.ID+":"+x.Direction, x.Line, &events.ExitAddedPayload{FromLocationID: l.ID, ToLocationID: x.To, Direction: x.Direction, Description: x.Description})
			if x.Back != "" {
				add(events.KindExitAdded, x.To+":"+x.Back, x.Line, &events.ExitAddedPayload{FromLocationID: x.To, ToLocationID: l.ID, Direction: x.Back})
			}
		}
	}
	for _, n := range w.NPCs {
		add(events.KindNPCCreated, n.ID, n.Line, &events.NPCCreatedPayload{NPCID: n.ID, Name: n.Name, Persona: n.Persona, Mood: n.Mood, LocationID: n.Location, FactionID: n.Faction, Rank: n.Rank})
	}
	for _, pl := range w.Players {
		add(events.KindPlayerCreated, pl.ID, pl.Line, &events.PlayerCreatedPayload{PlayerID: pl.ID, Name: pl.Name, LocationID: pl.Location})
	}
	for _, it := range w.Items {
		add(events.KindItemCreated, it.ID, it.Line, &events.ItemCreatedPayload{ItemID: it.ID, Name: it.Name, Description: it.Description, LocationID: it.Location, HolderID: it.Holder})
	}
	for _, l := range w.Lore {
		add(events.KindLoreFactAdded, l.ID, l.Line, &events.LoreFactAddedPayload{LoreID: l.ID, Title: l.Title, Text: l.Text, Tags: l.Tags, Canonical: l.Canonical, About: l.About})
	}
	return out
}

// CorrelationID is the correlation id of every proposal of the world named name: `worldgate
// trace` follows a load with it.
func CorrelationID(name string) string { return "world:" + name }

// AgentRole is the agent role of world-loading proposals.
const AgentRole = "world-loader"

// ProposalID is the deterministic id of the proposal of kind for entity in world: loading the
// same world twice yields the same ids, so the second load changes nothing.
func ProposalID(world, kind, entity string) string {
	id := "world:" + world + ":" + kind + ":" + entity
	if len(id) <= 128 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "world:" + hex.EncodeToString(sum[:20])
}

// Proposals turns w into proposals in apply order (factions and locations, exits, NPCs,
// players, items, lore). routeFor gives each kind's route (the gates it must pass), as
// configured for the pipeline.
func Proposals(w *World, routeFor func(kind string) ([]string, error)) ([]events.Proposal, error) {
	if w == nil || routeFor == nil {
		return nil, errors.New("worldfile: a world and a route function are required")
	}
	now := time.Now().UTC()
	var out []events.Proposal
	for _, d := range w.drafts() {
		info, ok := events.LookupKind(d.kind)
		if !ok {
			return nil, fmt.Errorf("worldfile: unknown kind %s", d.kind)
		}
		route, err := routeFor(d.kind)
		if err != nil {
			return nil, fmt.Errorf("route for %s: %w", d.kind, err)
		}
		out = append(out, events.Proposal{
			ProposalID: ProposalID(w.Name, d.kind, d.entity), Kind: d.kind, SchemaVersion: events.ProposalSchemaVersion,
			CorrelationID: CorrelationID(w.Name), CausationID: CorrelationID(w.Name), AgentRole: AgentRole,
			Actor: events.Actor{Kind: "operator", ID: "world-loader"}, Payload: d.payload,
			Route: events.Route{Pending: append(make([]string, 0, len(route)), route...)}, RequiresApproval: info.Destructive, CreatedUTC: now,
		})
	}
	return out, nil
}

//go:embed demo/ashfall.yaml
var demo []byte

// DemoFile is the demo world's file name.
const DemoFile = "ashfall.yaml"

// Demo returns the demo world file (Ashfall) as YAML.
func Demo() []byte { return append([]byte(nil), demo...) }

// DemoWorld parses the demo world.
func DemoWorld() (*World, error) { return Parse(DemoFile, demo) }
