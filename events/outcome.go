package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"
)

// OutcomeSchemaVersion is the Outcome format version this module writes. A new field or kind
// bumps it; readers refuse versions they do not know (DecodeOutcome names the field). Version 2
// added kind skipped and its Skip, version 3 kind reused and its Reuse: outcomes of earlier
// versions (which cannot carry what came later) are still read, so outcomes in flight across an
// upgrade drain.
const OutcomeSchemaVersion = "3"

// OutcomeSchemaAccepted reports whether this module reads outcomes of schema version v.
func OutcomeSchemaAccepted(v string) bool {
	return v == OutcomeSchemaVersion || v == "2" || v == "1"
}

// OutcomeKind is how a request ended.
type OutcomeKind string

// Outcome kinds.
const (
	// OutcomeCommitted: content (or a move) was committed to the world; Event is the domain event.
	OutcomeCommitted OutcomeKind = "committed"
	// OutcomeFallback: the AI's content was refused (or could not be produced) and Worldgate's
	// static fallback content was committed instead; Event is that domain event and
	// FallbackReason says why.
	OutcomeFallback OutcomeKind = "fallback"
	// OutcomeRefused: nothing was committed for this request and nothing more will be tried;
	// Refusal says which gate refused it, with which code, and a reason a game can show.
	OutcomeRefused OutcomeKind = "refused"
	// OutcomeSkipped: the agent role decided not to act on the event (the place's ambience is
	// still fresh, say): nothing was proposed and nothing refused. Skip says why, with a
	// reason a game can show, and when the same request may be acted on again.
	OutcomeSkipped OutcomeKind = "skipped"
	// OutcomeReused: the answer would have near-duplicated content already accepted for the
	// same target (the dedup gate's scope: a quest per location, a line per NPC–player pair,
	// ambience per location), so that content is the answer instead of a new one: Reuse names
	// it and carries its payload. Nothing new was committed for this request, and no model was
	// asked again.
	OutcomeReused OutcomeKind = "reused"
)

// OutcomeKinds lists every outcome kind.
func OutcomeKinds() []OutcomeKind {
	return []OutcomeKind{OutcomeCommitted, OutcomeFallback, OutcomeRefused, OutcomeSkipped, OutcomeReused}
}

// Refusal codes that are not a gate's rejection code.
const (
	// CodeMoveRefused: the world-rules agent found no way to make the requested move (no exit in
	// that direction, an unknown location, not a direction).
	CodeMoveRefused Code = "MOVE_REFUSED"
	// CodeGaveUp: the proposal was refused transiently more often than Worldgate retries.
	CodeGaveUp Code = "GAVE_UP"
	// CodeEventRefused: the world event itself was refused before any agent acted on it (it
	// is not a valid envelope, its Nats-Msg-Id is not its idempotency key, it occurred outside
	// the accepted clock window); it was dead-lettered with the same reason.
	CodeEventRefused Code = "EVENT_REFUSED"
)

// Skip codes (Skip.Code): why an agent role did not act on an event.
const (
	// CodeAmbienceFresh: the place the player moved into has ambience committed recently
	// enough; none is generated until Skip.RetryAfter has passed.
	CodeAmbienceFresh Code = "AMBIENCE_FRESH"
)

// Outcome is the final decision on one request: a world event (EventID) and the proposal an
// agent made for it. It is the one answer to "how did this request end", published once per
// final decision to OutcomeSubject(kind, actor) on stream OUTCOMES (see Watch and Await).
//
// A request may have several outcomes (one per agent role the event triggers, and a
// proposal that commits several domain events has one Event per outcome); OutcomeID is
// deterministic, so a redelivered decision is the same outcome (de-duplicate on it).
type Outcome struct {
	SchemaVersion string      `json:"schemaVersion"`
	OutcomeID     string      `json:"outcomeId"`
	Kind          OutcomeKind `json:"kind"`
	// EventID is the world event (envelope) this answers; CorrelationID its correlation id.
	EventID       string `json:"eventId"`
	CorrelationID string `json:"correlationId"`
	// ProposalID, ProposalKind and AgentRole name the proposal decided, when there was one (a
	// refused move has none).
	ProposalID   string `json:"proposalId,omitempty"`
	ProposalKind string `json:"proposalKind,omitempty"`
	AgentRole    string `json:"agentRole,omitempty"`
	// Actor is who the request was about (the player), LocationID where, when known.
	Actor      Actor  `json:"actor"`
	LocationID string `json:"locationId,omitempty"`
	// Event is the committed domain event (committed and fallback).
	Event *DomainEvent `json:"event,omitempty"`
	// FallbackReason says why fallback content was used (fallback only).
	FallbackReason string `json:"fallbackReason,omitempty"`
	// Refusal says who refused what and why (refused only).
	Refusal *Refusal `json:"refusal,omitempty"`
	// Skip says why the agent role did not act on the event (skipped only).
	Skip *Skip `json:"skip,omitempty"`
	// Reuse is the accepted content that answers the request (reused only).
	Reuse *Reuse `json:"reuse,omitempty"`
	// Journey summarises how the decision was reached, for consoles and reports.
	Journey    *Journey  `json:"journey,omitempty"`
	DecidedUTC time.Time `json:"decidedUtc"`
}

// Refusal is why nothing was committed: the gate (or agent role) that refused, its code, a
// sentence a game can show a player, and whether trying again later may succeed.
type Refusal struct {
	Gate       string  `json:"gate"`
	Code       Code    `json:"code"`
	Reason     string  `json:"reason"`
	Transient  bool    `json:"transient"`
	RetryAfter float64 `json:"retryAfter,omitempty"` // seconds
}

// Skip is why an agent role did not act on an event: a stable code, a sentence a game can
// show, and when the same request may be acted on again (RetryAfter seconds after the
// decision, RetryAtUTC; zero: no sooner than any other request).
type Skip struct {
	Code       Code       `json:"code"`
	Reason     string     `json:"reason"`
	RetryAfter float64    `json:"retryAfter,omitempty"` // seconds
	RetryAtUTC *time.Time `json:"retryAtUtc,omitempty"`
}

// Reuse is the content a reused outcome answers with: the proposal whose content was accepted
// for the same target (it passed every gate up to and including dedup), the domain event that
// commits it (EventID; a game may look it up or link to it, e.g. the existing quest), when the
// dedup gate accepted it, and its payload (the proposal kind's payload, as a game shows it).
//
// Content accepted at the dedup gate is committed unless a later gate refuses it for good,
// which is rare (replay, rate and audit refuse what is malformed or over budget, and a rate
// refusal is retried): a reused outcome does not wait for that commit.
type Reuse struct {
	ProposalID  string          `json:"proposalId"`
	EventID     string          `json:"eventId"`
	AcceptedUTC time.Time       `json:"acceptedUtc"`
	Payload     json.RawMessage `json:"payload"`
}

// Journey is what the final proposal went through: its attempt (0 = the first answer, n = after
// n reprompts), each gate's decision, and what the model call cost.
type Journey struct {
	Attempt  int     `json:"attempt"`
	Gates    []Hop   `json:"gates,omitempty"`
	Provider string  `json:"provider,omitempty"`
	Model    string  `json:"model,omitempty"`
	Tokens   Tokens  `json:"tokens"`
	CostUSD  float64 `json:"costUsd"`
	CacheHit bool    `json:"cacheHit,omitempty"`
}

// Final reports whether the outcome ends its request for good (every outcome is final; the
// method exists so callers read as what they mean).
func (o *Outcome) Final() bool { return o.Kind != "" }

// Text is the content a game shows for a committed, fallback or reused outcome: the payload's "line"
// (dialogue), "text" (ambience) or "title: hook" (quest seed), else "".
func (o *Outcome) Text() string {
	var payload json.RawMessage
	switch {
	case o.Event != nil:
		payload = o.Event.Payload
	case o.Reuse != nil:
		payload = o.Reuse.Payload
	default:
		return ""
	}
	var f struct {
		Text  string `json:"text"`
		Line  string `json:"line"`
		Title string `json:"title"`
		Hook  string `json:"hook"`
	}
	_ = json.Unmarshal(payload, &f)
	switch {
	case f.Line != "":
		return f.Line
	case f.Text != "":
		return f.Text
	case f.Title != "" && f.Hook != "":
		return f.Title + ": " + f.Hook
	}
	return f.Title
}

// outcomeNamespace makes OutcomeID's UUIDv5s Worldgate's own.
var outcomeNamespace = uuid.MustParse("9a4e7c2b-1f3d-5e6a-8b9c-0d1e2f3a4b5c")

// OutcomeID is the deterministic id of the outcome that decision (e.g. "committed",
// "refused") reached on key (a domain event id, a proposal id, or an event id and agent role).
func OutcomeID(decision, key string) string {
	return uuid.NewSHA1(outcomeNamespace, []byte(decision+"/"+key)).String()
}

// Outcome subjects: world.outcomes.<kind>.<actor token>.
const (
	SubjectOutcomesAll   = "world.outcomes.>"
	subjectOutcomePrefix = "world.outcomes."
	// HeaderEventID carries, on an outcome, the id of the world event it answers.
	HeaderEventID = "Worldgate-Event-Id"
	// HeaderActor carries, on an outcome, its actor as kind:id.
	HeaderActor = "Worldgate-Actor"
)

// StreamOutcomes is the stream of final decisions.
const StreamOutcomes = "OUTCOMES"

var plainToken = regexp.MustCompile(`^[A-Za-z0-9:_-]{1,128}$`)

// ActorToken is the subject token of an actor id: the id itself when it is made of letters,
// digits, ':', '_' and '-' (every id of the contract's id patterns), else "x-" and the first
// 20 bytes of its SHA-256 in hex, so any id maps to one valid token.
func ActorToken(id string) string {
	if plainToken.MatchString(id) {
		return id
	}
	s := sha256.Sum256([]byte(id))
	return "x-" + hex.EncodeToString(s[:20])
}

// OutcomeSubject is where an outcome of kind about actor is published:
// world.outcomes.<kind>.<ActorToken(actor.ID)>. Filter on world.outcomes.*.<token> for one
// actor, world.outcomes.refused.> for one kind.
func OutcomeSubject(kind OutcomeKind, actorID string) string {
	return subjectOutcomePrefix + string(kind) + "." + ActorToken(actorID)
}

// OutcomeActorFilter is the subject filter of every outcome about actorID.
func OutcomeActorFilter(actorID string) string {
	return subjectOutcomePrefix + "*." + ActorToken(actorID)
}

// OutcomeKindFilter is the subject filter of every outcome of kind.
func OutcomeKindFilter(kind OutcomeKind) string { return subjectOutcomePrefix + string(kind) + ".>" }

// DecodeOutcome decodes data with the default Decoder.
func DecodeOutcome(data []byte) (*Outcome, error) { return Decoder{}.Outcome(data) }

// Outcome decodes one outcome strictly against schemas/v1/outcome.json.
func (d Decoder) Outcome(data []byte) (*Outcome, error) {
	if err := d.checkOutcome(data); err != nil {
		return nil, err
	}
	var o Outcome
	if err := decodeChecked(data, &o); err != nil { // checkOutcome's parse checked data
		return nil, &InvalidError{What: "outcome", Problems: []Problem{{ProblemMalformed, "", err.Error()}}}
	}
	return &o, nil
}

// checkOutcome checks data against the outcome schema without decoding it into an Outcome.
func (d Decoder) checkOutcome(data []byte) error {
	doc, err := d.parse("outcome", data)
	if err != nil {
		return err
	}
	if probs := check(compiled().outcome, doc, ""); len(probs) > 0 {
		m, _ := doc.(map[string]any)
		for i, p := range probs {
			switch {
			case p.Path == "/schemaVersion":
				probs[i] = Problem{ProblemSpecVersion, p.Path,
					fmt.Sprintf("outcome schemaVersion %v is not supported by this reader (it reads 1 to %s): upgrade the events module", m["schemaVersion"], OutcomeSchemaVersion)}
			case m["schemaVersion"] == "1" && (p.Path == "/kind" && m["kind"] == string(OutcomeSkipped) || p.Path == "/skip"):
				probs[i] = Problem{ProblemInvalidField, p.Path,
					"an outcome of schemaVersion 1 cannot be skipped nor carry a skip: publish it as schemaVersion " + OutcomeSchemaVersion}
			case (m["schemaVersion"] == "1" || m["schemaVersion"] == "2") && (p.Path == "/kind" && m["kind"] == string(OutcomeReused) || p.Path == "/reuse"):
				probs[i] = Problem{ProblemInvalidField, p.Path,
					fmt.Sprintf("an outcome of schemaVersion %v cannot be reused nor carry a reuse: publish it as schemaVersion %s", m["schemaVersion"], OutcomeSchemaVersion)}
			}
		}
		return &InvalidError{What: "outcome", Problems: probs}
	}
	return nil
}

// Validate checks o against the outcome schema, as a reader will (publishers call it before
// publishing).
func (o *Outcome) Validate() error {
	_, err := o.Encode()
	return err
}

// Encode is o's JSON encoding, checked against the outcome schema as a reader will check it:
// what a publisher sends (one encoding, validated once).
func (o *Outcome) Encode() ([]byte, error) {
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	if err := (Decoder{}).checkOutcome(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// locationOf reads the location a payload is about: locationId, else toLocationId.
func locationOf(payload json.RawMessage) string {
	var f struct {
		LocationID   string `json:"locationId"`
		ToLocationID string `json:"toLocationId"`
	}
	_ = json.Unmarshal(payload, &f)
	if f.LocationID != "" {
		return f.LocationID
	}
	return f.ToLocationID
}

// journeyOf summarises p's route and provenance.
func journeyOf(p *Proposal) *Journey {
	j := &Journey{Attempt: p.Attempt, Gates: p.Route.Trail}
	if pv := p.Provenance; pv != nil {
		j.Provider, j.Model, j.Tokens, j.CostUSD, j.CacheHit = pv.Provider, pv.Model, pv.Tokens, pv.CostUSD, pv.CacheHit
	}
	return j
}

// CommittedOutcome is the outcome of proposal p whose domain event evt was committed: kind
// fallback when p carries fallback content, else committed.
func CommittedOutcome(p *Proposal, evt DomainEvent) *Outcome {
	kind := OutcomeCommitted
	reason := ""
	if p.Provenance != nil && p.Provenance.Fallback != "" {
		kind, reason = OutcomeFallback, p.Provenance.Fallback
	}
	e := evt
	return &Outcome{
		SchemaVersion: OutcomeSchemaVersion, OutcomeID: OutcomeID(string(kind), evt.EventID), Kind: kind,
		EventID: p.CausationID, CorrelationID: p.CorrelationID,
		ProposalID: p.ProposalID, ProposalKind: p.Kind, AgentRole: p.AgentRole, Actor: p.Actor,
		LocationID: locationOf(p.Payload), Event: &e, FallbackReason: reason,
		Journey: journeyOf(p), DecidedUTC: evt.CommittedUTC,
	}
}

// EncodeCommittedOutcome is CommittedOutcome(p, evt) and its JSON encoding, without Encode's
// pass over the outcome schema: the event-processor builds it from a proposal every gate
// passed and the domain event it just committed, and the schema pass was a quarter of its CPU
// per commit (docs/performance.md). Its readers still check it (Decoder.Outcome); the
// processor's tests read back every outcome they publish, of every kind, the way readers do.
func EncodeCommittedOutcome(p *Proposal, evt DomainEvent) (*Outcome, []byte, error) {
	o := CommittedOutcome(p, evt)
	raw, err := json.Marshal(o)
	return o, raw, err
}

// RefusedOutcome is the outcome of a proposal refused for good by rej.
func RefusedOutcome(p *Proposal, rej *Rejection, code Code, reason string, at time.Time) *Outcome {
	o := &Outcome{
		SchemaVersion: OutcomeSchemaVersion, OutcomeID: OutcomeID("refused", p.ProposalID), Kind: OutcomeRefused,
		EventID: p.CausationID, CorrelationID: p.CorrelationID,
		ProposalID: p.ProposalID, ProposalKind: p.Kind, AgentRole: p.AgentRole, Actor: p.Actor,
		LocationID: locationOf(p.Payload),
		Refusal:    &Refusal{Gate: rej.Gate, Code: code, Reason: clip(reason), Transient: rej.Transient, RetryAfter: rej.RetryAfter},
		Journey:    journeyOf(p), DecidedUTC: at.UTC(),
	}
	return o
}

// ReusedOutcome is the outcome of proposal p, refused by rej as a near-duplicate of content
// accepted for the same target, answered with that content (see OutcomeReused): its
// OutcomeID derives from p's id, so a redelivered refusal is the same outcome. The journey is
// p's (what the request cost).
func ReusedOutcome(p *Proposal, reuse Reuse, at time.Time) *Outcome {
	reuse.AcceptedUTC = reuse.AcceptedUTC.UTC()
	return &Outcome{
		SchemaVersion: OutcomeSchemaVersion, OutcomeID: OutcomeID("reused", p.ProposalID), Kind: OutcomeReused,
		EventID: p.CausationID, CorrelationID: p.CorrelationID,
		ProposalID: p.ProposalID, ProposalKind: p.Kind, AgentRole: p.AgentRole, Actor: p.Actor,
		LocationID: locationOf(p.Payload), Reuse: &reuse,
		Journey: journeyOf(p), DecidedUTC: at.UTC(),
	}
}

// RequestRefused is the outcome of a world event that an agent role refused before proposing
// anything (a move with no exit that way): gate is the role.
func RequestRefused(env *Envelope, role, locationID string, code Code, reason string, at time.Time) *Outcome {
	return &Outcome{
		SchemaVersion: OutcomeSchemaVersion, OutcomeID: OutcomeID("refused", env.EventID+"/"+role), Kind: OutcomeRefused,
		EventID: env.EventID, CorrelationID: env.CorrelationID, AgentRole: role, Actor: env.Actor, LocationID: locationID,
		Refusal:    &Refusal{Gate: role, Code: code, Reason: clip(reason)},
		DecidedUTC: at.UTC(),
	}
}

// SkippedOutcome is the outcome of a world event that agent role decided not to act on (see
// OutcomeSkipped): one per (event, role), its OutcomeID derived from both, so a redelivered
// trigger is the same outcome. retryAfter (≥ 0) says when the same request may be acted on.
func SkippedOutcome(env *Envelope, role, locationID string, code Code, reason string, retryAfter time.Duration, at time.Time) *Outcome {
	at = at.UTC()
	skip := &Skip{Code: code, Reason: clip(reason)}
	if retryAfter > 0 {
		// Whole milliseconds: the same skip reads the same in every language.
		retryAfter = retryAfter.Round(time.Millisecond)
		when := at.Add(retryAfter)
		skip.RetryAfter, skip.RetryAtUTC = retryAfter.Seconds(), &when
	}
	return &Outcome{
		SchemaVersion: OutcomeSchemaVersion, OutcomeID: OutcomeID("skipped", env.EventID+"/"+role), Kind: OutcomeSkipped,
		EventID: env.EventID, CorrelationID: env.CorrelationID, AgentRole: role, Actor: env.Actor, LocationID: locationID,
		Skip: skip, DecidedUTC: at,
	}
}

// EventRefused is the outcome of a world event that role refused to act on at all (see
// CodeEventRefused), addressed to the actor the envelope claims, so whoever published it and
// awaits it (Await, edge) learns why instead of waiting for its deadline. The claimed actor
// is the publisher's own claim (any publisher may already publish events for the actors it
// names); a player the payload names is never addressed, so an event that impersonates
// another player (actor ≠ payload playerId) tells only the actor that sent it. It is nil when the
// claim leaves nothing to address (no event id or actor) or would not make a valid outcome.
// Only eventId, correlationId and actor are read from data, leniently: data is the refused
// message, which may be invalid in any other way.
func EventRefused(data []byte, role, reason string, at time.Time) *Outcome {
	var claim struct {
		EventID       string `json:"eventId"`
		CorrelationID string `json:"correlationId"`
		Actor         Actor  `json:"actor"`
	}
	if json.Unmarshal(data, &claim) != nil || claim.EventID == "" || claim.Actor.ID == "" {
		return nil
	}
	if claim.CorrelationID == "" {
		claim.CorrelationID = claim.EventID
	}
	env := &Envelope{EventID: claim.EventID, CorrelationID: claim.CorrelationID, Actor: claim.Actor}
	o := RequestRefused(env, role, "", CodeEventRefused, reason, at)
	if o.Validate() != nil {
		return nil
	}
	return o
}

// MisroutedError is CheckOutcomeSubject's refusal: an outcome whose body claims a kind or an
// actor that its subject does not.
type MisroutedError struct {
	Subject string // where it was published
	Want    string // where an outcome with its body is published
}

func (e *MisroutedError) Error() string {
	return fmt.Sprintf("outcome published on %s but its body belongs on %s: dropped (only the event-processor may publish committed and fallback outcomes, and NATS enforces who publishes on each subject)", e.Subject, e.Want)
}

// CheckOutcomeSubject reports whether o may be believed as published on subject. NATS lets
// only the event-processor publish on world.outcomes.committed.> and .fallback.>, and the
// ai-worker only on .refused.>, .skipped.> and .reused.> (worldgate nats-config): the subject is the
// publisher's identity, so a reader believes a body only where it matches its subject — its
// kind, its actor — and a refusal or a skip only when it carries no content. Watch applies it
// to every outcome.
func CheckOutcomeSubject(subject string, o *Outcome) error {
	if want := o.Subject(); subject != want {
		return &MisroutedError{Subject: subject, Want: want}
	}
	switch {
	case o.Kind == OutcomeRefused && o.Event != nil:
		return &MisroutedError{Subject: subject, Want: "nowhere: a refused outcome carries no committed event"}
	case o.Kind == OutcomeSkipped && o.Event != nil:
		return &MisroutedError{Subject: subject, Want: "nowhere: a skipped outcome carries no committed event"}
	case o.Kind != OutcomeRefused && o.Refusal != nil:
		return &MisroutedError{Subject: subject, Want: "nowhere: a " + string(o.Kind) + " outcome carries no refusal"}
	case o.Kind != OutcomeSkipped && o.Skip != nil:
		return &MisroutedError{Subject: subject, Want: "nowhere: a " + string(o.Kind) + " outcome carries no skip"}
	case o.Kind == OutcomeReused && o.Event != nil:
		return &MisroutedError{Subject: subject, Want: "nowhere: a reused outcome carries no committed event (its content is in reuse)"}
	case o.Kind != OutcomeReused && o.Reuse != nil:
		return &MisroutedError{Subject: subject, Want: "nowhere: a " + string(o.Kind) + " outcome carries no reuse"}
	}
	return nil
}

// Subject is where o is published: OutcomeSubject(o.Kind, o.Actor.ID).
func (o *Outcome) Subject() string { return OutcomeSubject(o.Kind, o.Actor.ID) }

// Headers are the headers o is published with besides Nats-Msg-Id (= OutcomeID): its
// correlation id, the event it answers, its kind (Worldgate-Type) and its actor, so a reader
// can filter on headers alone.
func (o *Outcome) Headers() map[string]string {
	return map[string]string{
		HeaderCorrelationID: o.CorrelationID,
		HeaderEventID:       o.EventID,
		HeaderType:          string(o.Kind),
		HeaderActor:         o.Actor.Kind + ":" + o.Actor.ID,
	}
}

// clip keeps a reason within the schema's 2000 characters.
func clip(s string) string {
	if r := []rune(s); len(r) > 2000 {
		return string(r[:1999]) + "…"
	}
	return s
}
