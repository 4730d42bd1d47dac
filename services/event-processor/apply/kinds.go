package apply

import (
	"fmt"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/google/uuid"

	"github.com/worldgate/worldgate/events"
)

// Ordering. Each command's guards and writes run in one transaction, so a command sees a
// consistent graph and either applies whole or not at all. Across commands:
//   - Creations (location, exit, NPC, faction, player, item, lore fact, quest) depend only on
//     the entities they reference existing; a creation that arrives before what it references
//     is a COMMIT_CONFLICT, never a half-applied change. The processor consumes in stream order
//     (see processor.Deps.MaxInFlight), so a world file's proposals apply in file order.
//   - Generated content (ambience, dialogue) only adds vertices linked to existing entities:
//     order-independent.
//   - Player moves are order-dependent: a move applies only if the player is still at its
//     fromLocationId and the exit exists (a compare-and-set on the player's position), and it
//     bumps the player's version, so a stale or reordered move is refused, never applied out
//     of order.
//   - Removals (exit, NPC) apply only if what they remove exists.

type mapper func(c *Command, p *events.Proposal) error

var mappers = map[string]mapper{
	events.KindLocationCreated: locationCreated,
	events.KindExitAdded:       exitAdded,
	events.KindExitRemoved:     exitRemoved,
	events.KindNPCCreated:      npcCreated,
	events.KindNPCRemoved:      npcRemoved,
	events.KindFactionCreated:  factionCreated,
	events.KindPlayerCreated:   playerCreated,
	events.KindItemCreated:     itemCreated,
	events.KindLoreFactAdded:   loreFactAdded,
	events.KindAmbience:        ambience,
	events.KindNPCDialogue:     npcDialogue,
	events.KindQuestSeed:       questSeed,
	events.KindPlayerMoved:     playerMoved,
}

// ---- guards ----

func (c *Command) refuseIf(reason string, violated func() *gremlingo.GraphTraversal) {
	c.guards = append(c.guards, guard{violated: violated, reason: reason})
}

// requireVertex refuses the command unless vertex id with label exists.
func (c *Command) requireVertex(label, id, what string) {
	c.refuseIf(what+" "+id+" does not exist", func() *gremlingo.GraphTraversal {
		return __.Not(__.V(id).HasLabel(label))
	})
}

// requireAbsent refuses the command if vertex id exists.
func (c *Command) requireAbsent(id, what string) {
	c.refuseIf(what+" "+id+" already exists", func() *gremlingo.GraphTraversal {
		return __.Filter(__.V(id))
	})
}

func (c *Command) write(w func() *gremlingo.GraphTraversal) { c.writes = append(c.writes, w) }

// requireEntity refuses unless an entity with a prefixed id (loc:, npc:, …) exists.
func (c *Command) requireEntity(id string) {
	c.requireVertex(labelOf(id), id, "entity")
}

func labelOf(id string) string { return events.EntityLabel(id) }

// payloadOf decodes p's payload into its kind's type (events.KindInfo), strictly.
func payloadOf[T events.Payload](p *events.Proposal) (T, error) {
	var zero T
	pl, err := events.DecodePayload(p.Kind, p.Payload)
	if err != nil {
		return zero, err
	}
	v, ok := pl.(T)
	if !ok {
		return zero, fmt.Errorf("a %s payload decodes to %T, not %T", p.Kind, pl, zero)
	}
	return v, nil
}

// ---- write helpers ----

type props = map[any]any

// createVertex merges the vertex by id and label, setting props when it is created (the
// guards have already refused an existing id, so onCreate always runs; mergeV keeps the write
// itself idempotent). Set-valued properties are added with set cardinality.
func createVertex(id, label string, p props, sets map[string][]string) func() *gremlingo.GraphTraversal {
	return func() *gremlingo.GraphTraversal {
		t := __.MergeV(props{gremlingo.T.Id: id, gremlingo.T.Label: label}).Option(gremlingo.Merge.OnCreate, p)
		for k, vs := range sets {
			for _, v := range vs {
				t = t.Property(gremlingo.Cardinality.Set, k, v)
			}
		}
		return t
	}
}

// edge merges an edge from → to with label and, on creation, props.
func edge(from, label, to string, p props) func() *gremlingo.GraphTraversal {
	return func() *gremlingo.GraphTraversal {
		t := __.MergeE(props{gremlingo.Direction.Out: from, gremlingo.Direction.In: to, gremlingo.T.Label: label})
		if len(p) > 0 {
			t = t.Option(gremlingo.Merge.OnCreate, p)
		}
		return t
	}
}

// ---- kinds ----

func locationCreated(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.LocationCreatedPayload](p)
	if err != nil {
		return err
	}
	c.requireAbsent(v.LocationID, "location")
	c.write(createVertex(v.LocationID, "Location",
		props{"name": v.Name, "description": v.Description, "region": v.Region, "version": int64(1)},
		map[string][]string{"tags": v.Tags}))
	return nil
}

func exitAdded(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.ExitAddedPayload](p)
	if err != nil {
		return err
	}
	c.requireVertex("Location", v.FromLocationID, "location")
	c.requireVertex("Location", v.ToLocationID, "location")
	from, to, dir := v.FromLocationID, v.ToLocationID, v.Direction
	c.refuseIf(from+" already has an exit "+dir+" to another location", func() *gremlingo.GraphTraversal {
		return __.Filter(__.V(from).OutE("exit").Has("direction", dir).InV().Not(__.HasId(to)))
	})
	// Exits do not bump the location's version (graph model). The direction is part of what
	// the write matches: two locations may be joined by several exits (north and west to the
	// same market), and matching on the endpoints alone would take the first exit for the
	// second and create nothing.
	c.write(func() *gremlingo.GraphTraversal {
		return __.MergeE(props{gremlingo.Direction.Out: from, gremlingo.Direction.In: to, gremlingo.T.Label: "exit", "direction": dir}).
			Option(gremlingo.Merge.OnCreate, props{"description": v.Description})
	})
	return nil
}

func exitRemoved(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.ExitRemovedPayload](p)
	if err != nil {
		return err
	}
	from, dir := v.FromLocationID, v.Direction
	c.refuseIf(from+" has no exit "+dir, func() *gremlingo.GraphTraversal {
		return __.Not(__.V(from).OutE("exit").Has("direction", dir))
	})
	c.write(func() *gremlingo.GraphTraversal { return __.V(from).OutE("exit").Has("direction", dir).Drop() })
	return nil
}

func npcCreated(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.NPCCreatedPayload](p)
	if err != nil {
		return err
	}
	c.requireAbsent(v.NPCID, "NPC")
	c.requireVertex("Location", v.LocationID, "location")
	if v.FactionID != "" {
		c.requireVertex("Faction", v.FactionID, "faction")
	}
	c.write(createVertex(v.NPCID, "NPC", props{"name": v.Name, "persona": v.Persona, "mood": v.Mood, "version": int64(1)}, nil))
	c.write(edge(v.NPCID, "at", v.LocationID, nil))
	if v.FactionID != "" {
		c.write(edge(v.NPCID, "member_of", v.FactionID, props{"rank": v.Rank}))
	}
	return nil
}

func npcRemoved(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.NPCRemovedPayload](p)
	if err != nil {
		return err
	}
	id := v.NPCID
	c.requireVertex("NPC", id, "NPC")
	// Dropping the vertex drops its edges; dialogue it spoke stays, unlinked from it.
	c.write(func() *gremlingo.GraphTraversal { return __.V(id).Drop() })
	return nil
}

func factionCreated(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.FactionCreatedPayload](p)
	if err != nil {
		return err
	}
	c.requireAbsent(v.FactionID, "faction")
	c.write(createVertex(v.FactionID, "Faction", props{"name": v.Name, "description": v.Description}, nil))
	return nil
}

func playerCreated(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.PlayerCreatedPayload](p)
	if err != nil {
		return err
	}
	c.requireAbsent(v.PlayerID, "player")
	c.requireVertex("Location", v.LocationID, "location")
	c.write(createVertex(v.PlayerID, "Player", props{"name": v.Name, "version": int64(0)}, nil))
	c.write(edge(v.PlayerID, "at", v.LocationID, nil))
	return nil
}

func itemCreated(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.ItemCreatedPayload](p)
	if err != nil {
		return err
	}
	c.requireAbsent(v.ItemID, "item")
	if v.LocationID != "" {
		c.requireVertex("Location", v.LocationID, "location")
	}
	if v.HolderID != "" {
		c.requireEntity(v.HolderID)
	}
	c.write(createVertex(v.ItemID, "Item", props{"name": v.Name, "description": v.Description}, nil))
	if v.LocationID != "" {
		c.write(edge(v.ItemID, "at", v.LocationID, nil))
	}
	if v.HolderID != "" {
		c.write(edge(v.HolderID, "holds", v.ItemID, nil))
	}
	return nil
}

func loreFactAdded(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.LoreFactAddedPayload](p)
	if err != nil {
		return err
	}
	c.requireAbsent(v.LoreID, "lore fact")
	for _, a := range v.About {
		c.requireEntity(a)
	}
	c.write(createVertex(v.LoreID, "LoreFact", props{"title": v.Title, "text": v.Text, "canonical": v.Canonical},
		map[string][]string{"tags": v.Tags}))
	for _, a := range v.About {
		c.write(edge(v.LoreID, "about", a, nil))
	}
	return nil
}

// AlreadyAnswered is in the reason of every refusal of a second answer to one triggering event
// (the ai-worker recognises it and does not answer that event again).
const AlreadyAnswered = "already has its committed answer"

// answerNamespace makes answer ids Worldgate's own UUIDv5s.
var answerNamespace = uuid.MustParse("9d3c6a2e-4b1f-5e8d-a7c0-1f2e3d4c5b6a")

// AnswerID is the id of the content vertex that answers a triggering world event: one per
// (causation event, agent role), whichever proposal (attempt, reprompt, fallback) it came from,
// so a second answer to the same event finds the first and is refused.
func AnswerID(prefix string, p *events.Proposal) string {
	return prefix + uuid.NewSHA1(answerNamespace, []byte(p.AgentRole+"/"+p.CausationID)).String()
}

// answerOnce makes id the vertex of p's answer and refuses the command when its triggering
// event already has one: one triggering event yields at most one committed answer of its kind.
// A refused answer (at a gate or here) creates nothing, so the reprompt or fallback content
// that replaces it still commits.
func (c *Command) answerOnce(id, what string, p *events.Proposal) {
	c.refuseIf(fmt.Sprintf("event %s %s from %s (%s %s, of an earlier proposal): one world event gets one %s, so proposal %s is not committed",
		p.CausationID, AlreadyAnswered, p.AgentRole, what, id, what, p.ProposalID), func() *gremlingo.GraphTraversal {
		return __.Filter(__.V(id))
	})
}

func ambience(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.AmbiencePayload](p)
	if err != nil {
		return err
	}
	id := AnswerID("amb:", p)
	c.answerOnce(id, "ambience", p)
	c.requireVertex("Location", v.LocationID, "location")
	c.write(createVertex(id, "Ambience", props{"text": v.Text, "mood": v.Mood, "proposalId": p.ProposalID, "createdUtc": utc(p)}, nil))
	c.write(edge(id, "describes", v.LocationID, nil))
	return nil
}

func npcDialogue(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.NPCDialoguePayload](p)
	if err != nil {
		return err
	}
	id := AnswerID("dlg:", p)
	c.answerOnce(id, "dialogue line", p)
	c.requireVertex("NPC", v.NPCID, "NPC")
	c.requireVertex("Player", v.PlayerID, "player")
	c.write(createVertex(id, "Dialogue", props{"line": v.Line, "intent": v.Intent, "proposalId": p.ProposalID, "createdUtc": utc(p)}, nil))
	c.write(edge(id, "spoken_by", v.NPCID, nil))
	c.write(edge(id, "spoken_to", v.PlayerID, nil))
	return nil
}

func questSeed(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.QuestSeedPayload](p)
	if err != nil {
		return err
	}
	// The quest vertex's id is the payload's questId, which the quest planner derives from the
	// triggering event (roles.QuestID) for every attempt and its fallback: an existing quest is
	// that event's committed answer. The narrator's quests are their own triggers.
	id := v.QuestID
	c.refuseIf(fmt.Sprintf("quest %s already exists: event %s %s from %s, or another proposal took the id; one request gets one quest seed, so proposal %s is not committed",
		id, p.CausationID, AlreadyAnswered, p.AgentRole, p.ProposalID), func() *gremlingo.GraphTraversal {
		return __.Filter(__.V(id))
	})
	c.requireVertex("Location", v.LocationID, "location")
	for _, e := range v.Involves {
		c.requireEntity(e)
	}
	c.write(createVertex(v.QuestID, "QuestSeed", props{"title": v.Title, "hook": v.Hook, "proposalId": p.ProposalID, "createdUtc": utc(p)},
		map[string][]string{"objectives": v.Objectives}))
	c.write(edge(v.QuestID, "set_in", v.LocationID, nil))
	for _, e := range v.Involves {
		c.write(edge(v.QuestID, "involves", e, nil))
	}
	return nil
}

func playerMoved(c *Command, p *events.Proposal) error {
	v, err := payloadOf[*events.PlayerMovedPayload](p)
	if err != nil {
		return err
	}
	player, from, to, dir := v.PlayerID, v.FromLocationID, v.ToLocationID, v.Direction
	c.requireVertex("Player", player, "player")
	c.refuseIf("player "+player+" is not at "+from+" (moved since the move was proposed)", func() *gremlingo.GraphTraversal {
		return __.Not(__.V(player).Out("at").HasId(from))
	})
	c.refuseIf(from+" has no exit "+dir+" to "+to, func() *gremlingo.GraphTraversal {
		return __.Not(__.V(from).OutE("exit").Has("direction", dir).InV().HasId(to))
	})
	c.write(func() *gremlingo.GraphTraversal { return __.V(player).OutE("at").Drop() })
	c.write(edge(player, "at", to, nil))
	// version := version + 1, as a long on every server (math() would make it a double).
	c.write(func() *gremlingo.GraphTraversal {
		return __.V(player).Property("version", __.Union(__.Values("version"), __.Constant(int64(1))).Sum())
	})
	return nil
}

func utc(p *events.Proposal) string {
	if p.OriginUTC != nil {
		return p.OriginUTC.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return p.CreatedUTC.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
