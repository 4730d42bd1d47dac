package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/go-playground/validator/v10"
	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/worldgate/worldgate/schemas"
)

// ProblemCode classifies what is wrong with a message. Each class of bad input has its own.
type ProblemCode string

// Problem codes.
const (
	ProblemTooLarge       ProblemCode = "too_large"
	ProblemMalformed      ProblemCode = "malformed_json"
	ProblemUnknownField   ProblemCode = "unknown_field"
	ProblemMissingField   ProblemCode = "missing_field"
	ProblemInvalidField   ProblemCode = "invalid_field"
	ProblemSpecVersion    ProblemCode = "unsupported_spec_version"
	ProblemUnknownType    ProblemCode = "unknown_type"
	ProblemInvalidPayload ProblemCode = "invalid_payload"
)

// Problem is one thing wrong with a message: where (a JSON Pointer such as
// "/payload/utterance"), which class, and a sentence saying what to fix.
type Problem struct {
	Code    ProblemCode `json:"code"`
	Path    string      `json:"path"`
	Message string      `json:"message"`
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// InvalidError is returned for a message that cannot be accepted. It lists every problem found.
type InvalidError struct {
	What     string // "envelope", "proposal", …
	Problems []Problem
}

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "invalid " + e.What + ": " + strings.Join(parts, "; ")
}

// Has reports whether err is an *InvalidError with a problem of code.
func Has(err error, code ProblemCode) bool {
	var inv *InvalidError
	if !errors.As(err, &inv) {
		return false
	}
	for _, p := range inv.Problems {
		if p.Code == code {
			return true
		}
	}
	return false
}

// Decoder decodes and validates messages strictly: unknown fields, missing or malformed
// fields, a wrong specVersion, an unknown type or kind, a payload that does not match its
// schema, and a message over MaxBytes are each reported as a Problem. The zero value is ready
// to use with DefaultMaxBytes.
type Decoder struct {
	MaxBytes int
}

// DecodeEnvelope decodes data with the default Decoder.
func DecodeEnvelope(data []byte) (*Envelope, error) { return Decoder{}.Envelope(data) }

// DecodeProposal decodes data with the default Decoder.
func DecodeProposal(data []byte) (*Proposal, error) { return Decoder{}.Proposal(data) }

// Envelope decodes one WorldEventEnvelope and validates it and its payload.
func (d Decoder) Envelope(data []byte) (*Envelope, error) {
	doc, err := d.parse("envelope", data)
	if err != nil {
		return nil, err
	}
	c := compiled()
	if probs := check(c.envelope, doc, ""); len(probs) > 0 {
		return nil, &InvalidError{What: "envelope", Problems: probs}
	}
	var env Envelope
	if err := decodeChecked(data, &env); err != nil { // parse checked data
		return nil, &InvalidError{What: "envelope", Problems: []Problem{{ProblemMalformed, "", err.Error()}}}
	}
	payloadSchema, ok := c.events[env.Type]
	if !ok {
		return nil, &InvalidError{What: "envelope", Problems: []Problem{{ProblemUnknownType, "/type",
			fmt.Sprintf("unknown event type %q: use one of %s", env.Type, strings.Join(EventTypes(), ", "))}}}
	}
	payloadDoc := doc.(map[string]any)["payload"]
	if probs := check(payloadSchema, payloadDoc, "/payload"); len(probs) > 0 {
		return nil, &InvalidError{What: "envelope", Problems: asPayload(probs)}
	}
	var probs []Problem
	probs = append(probs, structRules(&env, "")...)
	payload := payloadTypes[env.Type]()
	if err := decodeChecked(env.Payload, payload); err != nil { // within data, which parse checked
		probs = append(probs, Problem{ProblemInvalidPayload, "/payload", err.Error()})
	} else {
		probs = append(probs, asPayload(structRules(payload, "/payload"))...)
		// A player's event is about that player: budgets and limits key on the player the
		// payload names, so an actor claiming another player is refused.
		if np, ok := payload.(namesPlayer); ok && env.Actor.Kind == "player" && np.player() != "" && np.player() != env.Actor.ID {
			probs = append(probs, Problem{ProblemInvalidField, "/actor/id",
				fmt.Sprintf("the actor is player %q but the payload's playerId is %q: a player's event must name that player as its actor", env.Actor.ID, np.player())})
		}
	}
	if len(probs) > 0 {
		return nil, &InvalidError{What: "envelope", Problems: probs}
	}
	return &env, nil
}

// Proposal decodes one proposal and validates it and its payload against its kind's schema.
func (d Decoder) Proposal(data []byte) (*Proposal, error) {
	doc, err := d.parse("proposal", data)
	if err != nil {
		return nil, err
	}
	c := compiled()
	if probs := check(c.proposal, doc, ""); len(probs) > 0 {
		return nil, &InvalidError{What: "proposal", Problems: probs}
	}
	var p Proposal
	if err := decodeChecked(data, &p); err != nil { // parse checked data
		return nil, &InvalidError{What: "proposal", Problems: []Problem{{ProblemMalformed, "", err.Error()}}}
	}
	payloadSchema, ok := c.proposals[p.Kind]
	if !ok {
		names := make([]string, 0, len(kinds))
		for _, k := range kinds {
			names = append(names, k.Kind)
		}
		return nil, &InvalidError{What: "proposal", Problems: []Problem{{ProblemUnknownType, "/kind",
			fmt.Sprintf("unknown proposal kind %q: use one of %s", p.Kind, strings.Join(names, ", "))}}}
	}
	if probs := check(payloadSchema, doc.(map[string]any)["payload"], "/payload"); len(probs) > 0 {
		return nil, &InvalidError{What: "proposal", Problems: asPayload(probs)}
	}
	return &p, nil
}

// AttestedProposal decodes one proposal strictly (size limit, one JSON object, unknown fields
// refused, a known kind) without validating it against the JSON Schemas again. It is for the
// one consumer that acts on a proposal only after verifying the schema gate's signature over
// exactly this content (the event-processor, attest.Keyring.Verify): the schema gate validated
// it, and the signature proves this is the content it validated. The payload is decoded,
// strictly, by what applies it (DecodePayload). Everyone else uses Proposal.
func (d Decoder) AttestedProposal(data []byte) (*Proposal, error) {
	limit := d.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	if len(data) > limit {
		return nil, &InvalidError{What: "proposal", Problems: []Problem{{ProblemTooLarge, "",
			fmt.Sprintf("message is %d bytes, over the %d-byte limit: move bulky content out of the proposal", len(data), limit)}}}
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, &InvalidError{What: "proposal", Problems: []Problem{{ProblemMalformed, "", "must be a JSON object"}}}
	}
	if prob := jsonProblem(trimmed); prob != nil {
		// The signatures cover the canonical encoding, which keeps one of two same-named
		// members: the committed bytes must not hold the other.
		return nil, &InvalidError{What: "proposal", Problems: []Problem{*prob}}
	}
	var p Proposal
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, &InvalidError{What: "proposal", Problems: []Problem{{ProblemMalformed, "", err.Error()}}}
	}
	if dec.InputOffset() != int64(len(trimmed)) {
		return nil, &InvalidError{What: "proposal", Problems: []Problem{{ProblemMalformed, "", "data after the proposal's JSON object"}}}
	}
	if _, ok := LookupKind(p.Kind); !ok {
		return nil, &InvalidError{What: "proposal", Problems: []Problem{{ProblemUnknownType, "/kind", fmt.Sprintf("unknown proposal kind %q", p.Kind)}}}
	}
	return &p, nil
}

// ValidatePayload checks a proposal payload of kind against its schema, for agents that want
// to validate model output before proposing it.
func ValidatePayload(kind string, payload []byte) error {
	s, ok := compiled().proposals[kind]
	if !ok {
		return &InvalidError{What: kind + " payload", Problems: []Problem{{ProblemUnknownType, "", fmt.Sprintf("unknown proposal kind %q", kind)}}}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return &InvalidError{What: kind + " payload", Problems: []Problem{{ProblemMalformed, "", "not valid JSON: " + err.Error()}}}
	}
	if probs := check(s, doc, ""); len(probs) > 0 {
		return &InvalidError{What: kind + " payload", Problems: probs}
	}
	return nil
}

func (d Decoder) parse(what string, data []byte) (any, error) {
	limit := d.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	if len(data) > limit {
		return nil, &InvalidError{What: what, Problems: []Problem{{ProblemTooLarge, "",
			fmt.Sprintf("message is %d bytes, over the %d-byte limit: move bulky content out of the %s", len(data), limit, what)}}}
	}
	// Every reader must read the same message: a duplicate member or invalid UTF-8 is refused
	// before the schema (whose parser, like encoding/json, would keep one of the values).
	if p := jsonProblem(data); p != nil {
		return nil, &InvalidError{What: what, Problems: []Problem{*p}}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, &InvalidError{What: what, Problems: []Problem{{ProblemMalformed, "", "not valid JSON: " + err.Error()}}}
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, &InvalidError{What: what, Problems: []Problem{{ProblemMalformed, "", "must be a JSON object"}}}
	}
	return doc, nil
}

// strictUnmarshal decodes data into v refusing unknown fields and, first, anything two readers
// could read differently (CheckJSON: a duplicate member, invalid UTF-8).
func strictUnmarshal(data []byte, v any) error {
	if p := jsonProblem(data); p != nil {
		return errors.New(p.String())
	}
	return decodeChecked(data, v)
}

// decodeChecked is strictUnmarshal for data that passed jsonProblem already, or lies within a
// message that did (Decoder.parse checked it): each message is scanned for duplicate members and
// invalid UTF-8 once, not once per decode of it or of its payload.
func decodeChecked(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func asPayload(probs []Problem) []Problem {
	for i := range probs {
		probs[i].Code = ProblemInvalidPayload
	}
	return probs
}

var printer = message.NewPrinter(language.English)

// check validates doc against s and turns the library's error tree into Problems whose paths
// are prefixed with prefix.
func check(s *jsonschema.Schema, doc any, prefix string) []Problem {
	err := s.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Problem{{ProblemInvalidField, prefix, err.Error()}}
	}
	var probs []Problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		path := prefix + pointer(e.InstanceLocation)
		switch k := e.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				probs = append(probs, Problem{ProblemUnknownField, path + "/" + name,
					fmt.Sprintf("unknown field %q: remove it (v1 accepts no fields beyond its schema)", name)})
			}
		case *kind.Required:
			for _, name := range k.Missing {
				probs = append(probs, Problem{ProblemMissingField, path + "/" + name, "required field is missing: add it"})
			}
		case *kind.Const:
			if path == "/specVersion" {
				probs = append(probs, Problem{ProblemSpecVersion, path,
					fmt.Sprintf("specVersion %v is not supported: set it to %q", k.Got, SpecVersion)})
				return
			}
			probs = append(probs, Problem{ProblemInvalidField, path, k.LocalizedString(printer)})
		default:
			probs = append(probs, Problem{ProblemInvalidField, path, e.ErrorKind.LocalizedString(printer)})
		}
	}
	walk(ve)
	sort.SliceStable(probs, func(i, j int) bool { return probs[i].Path < probs[j].Path })
	return probs
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// structRules applies validator/v10 tags: the rules JSON Schema cannot express (an event id
// that is a UUIDv7, a move that goes somewhere else, text that is not blank, entries that do
// not repeat). Paths are JSON pointers under prefix.
func structRules(v any, prefix string) []Problem {
	err := validate().Struct(v)
	if err == nil {
		return nil
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return []Problem{{ProblemInvalidField, prefix, err.Error()}}
	}
	probs := make([]Problem, 0, len(verrs))
	for _, fe := range verrs {
		// Namespace is "<Struct>.field[2]": drop the struct, turn [i] into /i.
		ns := fe.Namespace()
		if i := strings.IndexByte(ns, '.'); i >= 0 {
			ns = ns[i+1:]
		}
		path := prefix + "/" + strings.NewReplacer("[", "/", "]", "", ".", "/").Replace(ns)
		var msg string
		switch fe.Tag() {
		case "uuidv7":
			msg = "must be a UUIDv7 (time-ordered): generate it with a UUIDv7 library"
		case "notblank":
			msg = "must not be blank: write some text"
		case "unique":
			msg = "must not repeat an entry"
		case "nefield":
			msg = fmt.Sprintf("must differ from %s", jsonName(v, fe.Param()))
		case "excluded_without":
			msg = fmt.Sprintf("is only allowed together with %s", jsonName(v, fe.Param()))
		case "excluded_with":
			msg = fmt.Sprintf("is not allowed together with %s: give one or the other", jsonName(v, fe.Param()))
		default:
			msg = fmt.Sprintf("fails rule %q", fe.Tag())
		}
		probs = append(probs, Problem{ProblemInvalidField, path, msg})
	}
	return probs
}

// jsonName is the JSON name of v's field goName (FromLocationID → fromLocationId).
func jsonName(v any, goName string) string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && t.Kind() == reflect.Struct {
		if f, ok := t.FieldByName(goName); ok {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" {
				return name
			}
		}
	}
	return goName
}

var validate = sync.OnceValue(func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			return f.Name
		}
		return name
	})
	_ = v.RegisterValidation("notblank", func(fl validator.FieldLevel) bool {
		return strings.TrimSpace(fl.Field().String()) != ""
	})
	_ = v.RegisterValidation("uuidv7", func(fl validator.FieldLevel) bool {
		id, err := uuid.Parse(fl.Field().String())
		return err == nil && id.Version() == 7
	})
	return v
})

// SchemaCompiler is a JSON Schema compiler (draft 2020-12, formats asserted) holding every
// embedded schema under schemas/v1 by its $id, so that any of them, references included,
// compiles from it: c.Compile(schemas.URI("v1/world.json")).
func SchemaCompiler() (*jsonschema.Compiler, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	err := fs.WalkDir(schemas.FS(), "v1", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		raw, err := fs.ReadFile(schemas.FS(), path)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return c.AddResource(schemas.URI(path), doc)
	})
	return c, err
}

type schemaSet struct {
	envelope, proposal, rejection, domainEvent, outcome *jsonschema.Schema
	events                                              map[string]*jsonschema.Schema
	proposals                                           map[string]*jsonschema.Schema
}

// compiled compiles every embedded schema once. The schemas ship with the binary, so a failure
// is a build defect: it panics, and the package tests catch it.
var compiled = sync.OnceValue(func() *schemaSet {
	c, err := SchemaCompiler()
	if err != nil {
		panic("events: load embedded schemas: " + err.Error())
	}
	must := func(path string) *jsonschema.Schema {
		s, err := c.Compile(schemas.URI(path))
		if err != nil {
			panic("events: compile " + path + ": " + err.Error())
		}
		return s
	}
	set := &schemaSet{
		envelope:    must(schemas.Envelope),
		proposal:    must(schemas.Proposal),
		rejection:   must(schemas.Rejection),
		domainEvent: must(schemas.DomainEvent),
		outcome:     must(schemas.Outcome),
		events:      map[string]*jsonschema.Schema{},
		proposals:   map[string]*jsonschema.Schema{},
	}
	for _, t := range EventTypes() {
		set.events[t] = must(schemas.EventPayload(t))
	}
	for _, k := range kinds {
		set.proposals[k.Kind] = must(schemas.ProposalPayload(k.Kind))
	}
	return set
})
