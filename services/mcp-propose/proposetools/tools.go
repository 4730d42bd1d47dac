// Package proposetools holds mcp-propose's tools: outside narrators (an editor, a chat
// assistant, a game master's agent) propose a dialogue line, a quest seed or ambience, or
// enqueue a world event that asks Worldgate's agents for content, and read how each ended.
// Nothing is written to the world here: every proposal goes through the gates like the
// agents' own, as the narrator emitter (proposals.emit.narrator, the only proposal subject the
// server's NATS user may publish to), on its kind's route with safety and without replay
// (events.NarratorRoute). Who proposed comes from the access token (its subject and issuer),
// never from the arguments; calls are attributed and rate-limited per client by
// shared/mcpx. A narrator is not a player: it enqueues world events as itself (the envelope's
// actor is narrator:<client>, its source mcp-propose) and names a player in one only if its
// token lists that player (the mcpx.ClaimPlayers claim). New builds the MCP server; Handler serves it over Streamable HTTP behind
// bearer authentication (scope propose).
package proposetools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// Version of the server.
const Version = "1.0.0"

// Name is the server's name in provenance (provenance.narrator.server).
const Name = "mcp-propose"

// Tool names.
const (
	ToolDialogue = "propose-dialogue-line"
	ToolQuest    = "propose-quest-seed"
	ToolAmbience = "propose-ambience"
	ToolEnqueue  = "enqueue-world-event"
	ToolStatus   = "proposal-status"
)

// Options configure the server.
type Options struct {
	mcpx.Options
	// JetStream publishes proposals and world events and reads outcomes (NATS user
	// mcp-propose).
	JetStream jetstream.JetStream
	// Routes are the configured routes (nil: route.Default()).
	Routes *events.Routes
	// StatusWait is how long proposal-status reads the outcomes stream at most (default 5 s).
	StatusWait time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Server is mcp-propose.
type Server struct {
	mcp  *mcp.Server
	opts Options
}

// New builds the server and its tools.
func New(o Options) (*Server, error) {
	if o.JetStream == nil {
		return nil, errors.New("mcp-propose needs a NATS connection (JetStream) to propose on")
	}
	if o.Routes == nil {
		r := route.Default()
		o.Routes = &r
	} else if err := o.Routes.Validate(route.Known()); err != nil {
		return nil, err
	}
	if o.StatusWait <= 0 {
		o.StatusWait = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s, err := mcpx.NewServer("propose", Version,
		"Proposals from outside narrators. propose-dialogue-line, propose-quest-seed and propose-ambience submit content that Worldgate's gates check (schema, safety, invariants, duplicates, rate) before anything is committed; enqueue-world-event asks Worldgate's agents for content (a quest seed, an NPC's answer). Each returns an id; proposal-status says whether it was committed or refused, by which gate and why. Nothing here writes to the world directly.",
		o.Options)
	if err != nil {
		return nil, err
	}
	srv := &Server{mcp: s, opts: o}
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolDialogue,
		Description: "Propose a line an NPC says to a player at a location. The gates check it like an agent's (the NPC must be at the location, the player known; safety moderates the text); it is committed only if every gate passes it. Returns the proposal id and where to watch its outcome.",
		Annotations: writes("Propose an NPC dialogue line"),
		InputSchema: mcpx.InputSchema[DialogueInput](map[string]mcpx.Limit{"line": mcpx.StrLen(1, 500), "npcId": mcpx.StrLen(5, 66), "playerId": mcpx.StrLen(8, 70), "locationId": mcpx.StrLen(5, 67), "intent": mcpx.StrLen(1, 32), "correlationId": mcpx.StrLen(1, 128)}),
	}, srv.dialogue)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolQuest,
		Description: "Propose a quest seed at a location: a title, a hook and one to five objectives, optionally the entities it involves. Checked by the gates before it is committed. Returns the proposal id and where to watch its outcome.",
		Annotations: writes("Propose a quest seed"),
		InputSchema: mcpx.InputSchema[QuestInput](map[string]mcpx.Limit{"title": mcpx.StrLen(1, 120), "hook": mcpx.StrLen(1, 600), "locationId": mcpx.StrLen(5, 67), "questId": mcpx.StrLen(7, 69), "correlationId": mcpx.StrLen(1, 128)}),
	}, srv.quest)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolAmbience,
		Description: "Propose the ambience of a location: a short description of what it feels like now and a mood word. Checked by the gates before it is committed. Returns the proposal id and where to watch its outcome.",
		Annotations: writes("Propose ambience"),
		InputSchema: mcpx.InputSchema[AmbienceInput](map[string]mcpx.Limit{"text": mcpx.StrLen(1, 600), "mood": mcpx.StrLen(1, 32), "locationId": mcpx.StrLen(5, 67), "correlationId": mcpx.StrLen(1, 128)}),
	}, srv.ambience)
	types := events.NarratorEventTypes()
	mcp.AddTool(s, &mcp.Tool{
		Name: ToolEnqueue,
		Description: "Enqueue a world event that asks Worldgate's agents for content: " + strings.Join(types, " (payload {locationId, playerId?, factionId?, theme?}) or ") +
			" (payload {playerId, npcId, locationId, utterance}). A playerId must be one of the players your access token names (its players claim): the event speaks for that player; without one it is your own. The agents' proposals pass the gates as usual. Returns the event id and where to watch its outcome.",
		Annotations: writes("Enqueue a world event"),
		InputSchema: mcpx.InputSchema[EnqueueInput](map[string]mcpx.Limit{"type": {Enum: types}, "correlationId": mcpx.StrLen(1, 128)}),
	}, srv.enqueue)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolStatus,
		Description: "Report how a proposal or an enqueued event made through this server ended: pending, committed, fallback or refused (with the refusing gate, its code and a reason). Only the calling client's own proposals are visible.",
		Annotations: mcpx.ReadOnly("Proposal status"),
		InputSchema: mcpx.InputSchema[StatusInput](map[string]mcpx.Limit{"id": mcpx.StrLen(36, 36)}),
	}, srv.status)
	return srv, nil
}

// writes are the annotations of the proposing tools: not read-only (each call adds a proposal
// or an event), not destructive (additive only: narrators may not propose destructive kinds),
// not idempotent (each call is a new proposal), a closed world.
func writes(title string) *mcp.ToolAnnotations {
	f := false
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: false, DestructiveHint: &f, IdempotentHint: false, OpenWorldHint: &f}
}

// MCP returns the MCP server (for stdio or in-memory transports).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Handler serves the MCP endpoint over Streamable HTTP (mount it at /mcp).
func (s *Server) Handler() http.Handler {
	return s.opts.HTTPHandler(s.mcp, mcpx.ScopePropose)
}

// DialogueInput is propose-dialogue-line's input.
type DialogueInput struct {
	NPCID         string `json:"npcId" jsonschema:"the NPC who speaks, e.g. npc:brannoc"`
	PlayerID      string `json:"playerId" jsonschema:"the player spoken to, e.g. player:ada"`
	LocationID    string `json:"locationId" jsonschema:"where, e.g. loc:tavern (the NPC must be there)"`
	Line          string `json:"line" jsonschema:"what the NPC says (1..500 characters)"`
	Intent        string `json:"intent,omitempty" jsonschema:"what the line answers: greet, farewell, ask_about, trade, threaten, quest or other (default other)"`
	CorrelationID string `json:"correlationId,omitempty" jsonschema:"your own id to find the outcome by (default: the proposal id)"`
}

// QuestInput is propose-quest-seed's input.
type QuestInput struct {
	QuestID       string   `json:"questId,omitempty" jsonschema:"quest:<name> (default: one is made up)"`
	LocationID    string   `json:"locationId" jsonschema:"where the quest starts, e.g. loc:market-square"`
	Title         string   `json:"title" jsonschema:"the quest's title (1..120 characters)"`
	Hook          string   `json:"hook" jsonschema:"how a player hears of it (1..600 characters)"`
	Objectives    []string `json:"objectives" jsonschema:"one to five objectives"`
	Involves      []string `json:"involves,omitempty" jsonschema:"entity ids the quest involves (npc:…, loc:…, faction:…)"`
	CorrelationID string   `json:"correlationId,omitempty" jsonschema:"your own id to find the outcome by (default: the proposal id)"`
}

// AmbienceInput is propose-ambience's input.
type AmbienceInput struct {
	LocationID    string `json:"locationId" jsonschema:"the location, e.g. loc:tavern"`
	Text          string `json:"text" jsonschema:"what the place feels like now (1..600 characters)"`
	Mood          string `json:"mood" jsonschema:"one or two lower-case words, e.g. tense"`
	CorrelationID string `json:"correlationId,omitempty" jsonschema:"your own id to find the outcome by (default: the proposal id)"`
}

// EnqueueInput is enqueue-world-event's input.
type EnqueueInput struct {
	Type          string         `json:"type" jsonschema:"the world event type"`
	Payload       map[string]any `json:"payload" jsonschema:"the event's payload (schemas/v1/events/<type lower-cased>.json)"`
	CorrelationID string         `json:"correlationId,omitempty" jsonschema:"your own id to find the outcome by (default: the event id)"`
}

// StatusInput is proposal-status's input.
type StatusInput struct {
	ID string `json:"id" jsonschema:"a proposal id or event id this server returned"`
}

// Watch says where a proposal's or event's outcome appears.
type Watch struct {
	// StatusTool is the tool that reports it (proposal-status with id).
	StatusTool string `json:"statusTool"`
	// Stream and Subject: the outcome is published on stream OUTCOMES under this subject
	// (events.Watch with Actors [Actor] reads it).
	Stream  string `json:"stream"`
	Subject string `json:"subject"`
	Actor   string `json:"actor"`
}

// Submitted is what a proposing tool returns.
type Submitted struct {
	// ID is the proposal id (propose-*) or the event id (enqueue-world-event).
	ID            string `json:"id"`
	Kind          string `json:"kind"`
	CorrelationID string `json:"correlationId"`
	// Route lists the gates the proposal passes, in order (proposals only).
	Route []string `json:"route,omitempty"`
	Watch Watch    `json:"watch"`
}

// OutcomeSummary is one outcome as proposal-status reports it.
type OutcomeSummary struct {
	Kind         string `json:"kind"`
	ProposalID   string `json:"proposalId,omitempty"`
	ProposalKind string `json:"proposalKind,omitempty"`
	EventID      string `json:"eventId"`
	// Committed and fallback: the domain event and the content a game shows.
	EventType      string `json:"eventType,omitempty"`
	Text           string `json:"text,omitempty"`
	FallbackReason string `json:"fallbackReason,omitempty"`
	// Refused: the gate (or agent role), its code, why, and whether trying later may succeed.
	Gate       string  `json:"gate,omitempty"`
	Code       string  `json:"code,omitempty"`
	Reason     string  `json:"reason,omitempty"`
	Transient  bool    `json:"transient,omitempty"`
	RetryAfter float64 `json:"retryAfter,omitempty"`
	DecidedUTC string  `json:"decidedUtc"`
	// Gates are the gates that decided, in order, each with its outcome (gate:outcome).
	Gates []string `json:"gates,omitempty"`
}

// Status is proposal-status's answer.
type Status struct {
	ID string `json:"id"`
	// Status is pending (no outcome yet), committed, fallback or refused (the first outcome's).
	Status   string           `json:"status"`
	Outcomes []OutcomeSummary `json:"outcomes,omitempty"`
}

// caller is who calls, from the access token: its subject, issuer and the players it may act
// for ("stdio" on the trusted local transport, which has no token).
type caller struct {
	client, issuer string
	players        []string
	trusted        bool // no token: stdio (or -no-auth), trusted local use
}

func callerOf(req *mcp.CallToolRequest) caller {
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		ti := req.Extra.TokenInfo
		iss, _ := ti.Extra[mcpx.TokenExtraIssuer].(string)
		return caller{client: ti.UserID, issuer: iss, players: mcpx.TokenPlayers(ti)}
	}
	return caller{client: "stdio", trusted: true}
}

// mayActFor refuses a world event about a player the narrator's token does not name: a
// narrator is not a player, and an event naming one speaks for them (their words in an NPC's
// memory, their repeat-offender strikes). An event that names no player is the narrator's own.
// The trusted local transport (stdio, no token) acts for anyone.
func (c caller) mayActFor(player string) error {
	if player == "" || c.trusted || slices.Contains(c.players, player) {
		return nil
	}
	names := "names no players"
	if len(c.players) > 0 {
		names = "names only " + strings.Join(c.players, ", ")
	}
	return fmt.Errorf("narrator %q may not enqueue world events for player %q: its access token %s "+
		"(ask its authorization server for a token whose %q claim lists %s, or leave playerId out where the event allows it); nothing was enqueued",
		c.client, player, names, mcpx.ClaimPlayers, player)
}

// actor is the narrator client as an actor: outcomes of its proposals and events are published
// about it.
func (c caller) actor() events.Actor {
	id := c.client
	if len(id) > 110 {
		id = id[:110]
	}
	return events.Actor{Kind: "agent", ID: "narrator:" + id}
}

func (s *Server) watch(c caller) Watch {
	a := c.actor()
	return Watch{StatusTool: ToolStatus, Stream: events.StreamOutcomes, Subject: "world.outcomes.*." + events.ActorToken(a.ID), Actor: a.ID}
}

func (s *Server) dialogue(ctx context.Context, req *mcp.CallToolRequest, in DialogueInput) (*mcp.CallToolResult, Submitted, error) {
	intent := in.Intent
	if intent == "" {
		intent = "other"
	}
	payload := map[string]any{"npcId": in.NPCID, "playerId": in.PlayerID, "locationId": in.LocationID, "line": in.Line, "intent": intent}
	out, err := s.propose(ctx, req, ToolDialogue, events.KindNPCDialogue, payload, in.CorrelationID)
	return nil, out, err
}

func (s *Server) quest(ctx context.Context, req *mcp.CallToolRequest, in QuestInput) (*mcp.CallToolResult, Submitted, error) {
	id := in.QuestID
	if id == "" {
		id = "quest:narrated-" + strings.ReplaceAll(uuid.NewString()[:13], "-", "")
	}
	payload := map[string]any{"questId": id, "locationId": in.LocationID, "title": in.Title, "hook": in.Hook, "objectives": in.Objectives}
	if len(in.Involves) > 0 {
		payload["involves"] = in.Involves
	}
	out, err := s.propose(ctx, req, ToolQuest, events.KindQuestSeed, payload, in.CorrelationID)
	return nil, out, err
}

func (s *Server) ambience(ctx context.Context, req *mcp.CallToolRequest, in AmbienceInput) (*mcp.CallToolResult, Submitted, error) {
	payload := map[string]any{"locationId": in.LocationID, "text": in.Text, "mood": in.Mood}
	out, err := s.propose(ctx, req, ToolAmbience, events.KindAmbience, payload, in.CorrelationID)
	return nil, out, err
}

// propose builds the narrator's proposal of kind, checks it as the schema gate will (so a
// narrator learns of a malformed payload at once, as a tool error naming the field), and
// publishes it on proposals.emit.narrator.
func (s *Server) propose(ctx context.Context, req *mcp.CallToolRequest, tool, kind string, payload map[string]any, correlationID string) (Submitted, error) {
	if !events.EmitterMay(events.EmitterNarrator, kind) { // the tools name only the narrator's kinds
		return Submitted{}, fmt.Errorf("narrators may not propose %s", kind)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return Submitted{}, err
	}
	if err := events.ValidatePayload(kind, raw); err != nil {
		return Submitted{}, mcpx.InvalidInput("%s", invalid(err))
	}
	pending, err := s.opts.Routes.ForEmitter(events.EmitterNarrator, kind)
	if err != nil {
		return Submitted{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Submitted{}, err
	}
	c := callerOf(req)
	if correlationID == "" {
		correlationID = id.String()
	}
	p := &events.Proposal{
		ProposalID: id.String(), Kind: kind, SchemaVersion: events.ProposalSchemaVersion,
		CorrelationID: correlationID, CausationID: id.String(), AgentRole: events.EmitterNarrator, Actor: c.actor(),
		Payload:    raw,
		Provenance: &events.Provenance{Narrator: &events.Narration{Client: c.client, Issuer: c.issuer, Server: Name, Tool: tool}},
		Route:      events.Route{Pending: pending}, CreatedUTC: s.opts.Now().UTC(),
	}
	if _, err := (events.Decoder{}).Proposal(mustJSON(p)); err != nil { // what the schema gate will check
		return Submitted{}, mcpx.InvalidInput("%s", invalid(err))
	}
	subject := events.EmitSubject(events.EmitterNarrator)
	msg := runtime.NewMessage(subject, p.ProposalID+"@submit", mustJSON(p))
	msg.Metadata.Set(events.HeaderCorrelationID, p.CorrelationID)
	msg.Metadata.Set(events.HeaderCausationID, p.CausationID)
	msg.Metadata.Set(events.HeaderType, p.Kind)
	if err := runtime.NewPublisher(s.opts.JetStream, 0).PublishContext(ctx, "", msg); err != nil {
		return Submitted{}, fmt.Errorf("the proposal could not be submitted (nothing was proposed; try again): %w", err)
	}
	return Submitted{ID: p.ProposalID, Kind: kind, CorrelationID: p.CorrelationID, Route: pending, Watch: s.watch(c)}, nil
}

func (s *Server) enqueue(ctx context.Context, req *mcp.CallToolRequest, in EnqueueInput) (*mcp.CallToolResult, Submitted, error) {
	allowed := events.NarratorEventTypes()
	ok := false
	for _, t := range allowed {
		ok = ok || t == in.Type
	}
	if !ok {
		return nil, Submitted{}, mcpx.InvalidInput("narrators may enqueue %s, not %q", strings.Join(allowed, " or "), in.Type)
	}
	c := callerOf(req)
	env, err := events.NewEnvelope(in.Type, Name, c.actor(), in.Payload)
	if err != nil {
		return nil, Submitted{}, mcpx.InvalidInput("%s", invalid(err))
	}
	if in.CorrelationID != "" {
		env.CorrelationID = in.CorrelationID
	}
	if err := c.mayActFor(events.PlayerOf(env)); err != nil {
		return nil, Submitted{}, err
	}
	if _, err := events.Publish(ctx, s.opts.JetStream, env); err != nil {
		var inv *events.InvalidError
		if errors.As(err, &inv) {
			return nil, Submitted{}, mcpx.InvalidInput("%s", invalid(err))
		}
		return nil, Submitted{}, fmt.Errorf("the event could not be enqueued (nothing was enqueued; try again): %w", err)
	}
	return nil, Submitted{ID: env.EventID, Kind: env.Type, CorrelationID: env.CorrelationID, Watch: s.watch(c)}, nil
}

// invalid words a validation error for the narrator.
func invalid(err error) string {
	var inv *events.InvalidError
	if errors.As(err, &inv) && len(inv.Problems) > 0 {
		msgs := make([]string, 0, len(inv.Problems))
		for _, p := range inv.Problems {
			msgs = append(msgs, p.String())
		}
		return "invalid: " + strings.Join(msgs, "; ")
	}
	return err.Error()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // proposals are plain data: cannot fail
	}
	return b
}
