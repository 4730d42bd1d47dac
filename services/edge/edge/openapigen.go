package edge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/schemas"
)

//go:generate go run ./genopenapi

// The OpenAPI document is one definition with the contract (issue 40 item 4): openapi.base.json
// holds what is edge's own (paths, responses, its answers' shapes), and GenerateOpenAPI adds, as
// components, the JSON Schemas of schemas/v1 the API carries — the envelope and each event
// payload, the outcome with the domain event, proposal payloads and actor it refers to — with
// their references rewritten to components and each inline object they define (an outcome's
// refusal, skip, reuse and journey) named, so that generators give every one a type.
// TestOpenAPIIsGenerated keeps openapi.json equal to its output.

// GenerateOpenAPI returns the OpenAPI document: base with the contract's schemas added to its
// components.
func GenerateOpenAPI(base []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(base, &doc); err != nil {
		return nil, fmt.Errorf("openapi base: %w", err)
	}
	components, _ := doc["components"].(map[string]any)
	own, _ := components["schemas"].(map[string]any)
	if components == nil || own == nil {
		return nil, fmt.Errorf("openapi base: no components.schemas")
	}
	g := &openapiGen{out: map[string]any{}}
	var eventPayloads, proposalPayloads []any
	for _, t := range events.EventTypes() {
		name, err := g.add(schemas.EventPayload(t), "")
		if err != nil {
			return nil, err
		}
		eventPayloads = append(eventPayloads, ref(name))
	}
	for _, k := range events.Kinds() {
		name, err := g.add(schemas.ProposalPayload(k.Kind), "")
		if err != nil {
			return nil, err
		}
		proposalPayloads = append(proposalPayloads, ref(name))
	}
	for _, root := range []string{schemas.Envelope, schemas.Outcome} {
		if _, err := g.add(root, ""); err != nil {
			return nil, err
		}
	}
	// The contract types payloads by their envelope's type or their proposal's kind (the
	// decoders check each against its own schema); here a payload is one of them.
	setPayload := func(component string, of []any) error {
		s, _ := g.out[component].(map[string]any)
		props, _ := s["properties"].(map[string]any)
		p, _ := props["payload"].(map[string]any)
		if p == nil {
			return fmt.Errorf("openapi: %s has no payload", component)
		}
		delete(p, "type")
		p["anyOf"] = of
		return nil
	}
	for _, c := range []struct {
		name string
		of   []any
	}{{"Envelope", eventPayloads}, {"DomainEvent", proposalPayloads}, {"OutcomeReuse", proposalPayloads}} {
		if err := setPayload(c.name, c.of); err != nil {
			return nil, err
		}
	}
	for name, s := range g.out {
		if _, clash := own[name]; clash {
			return nil, fmt.Errorf("openapi base: component %s is generated from the schemas: remove it from openapi.base.json", name)
		}
		own[name] = s
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type openapiGen struct {
	out map[string]any // component name → schema
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// componentName names the schema file file (or its $defs entry def): Envelope, Outcome,
// PlayerMoveRequestedPayload (events/), NpcDialogueProposalPayload (proposals/), IdsLocation,
// ProposalHop.
func componentName(file, def string) string {
	dir, base := path.Split(strings.TrimSuffix(file, ".json"))
	name := pascal(base)
	switch path.Base(dir) {
	case "events":
		for _, t := range events.EventTypes() {
			if schemas.EventPayload(t) == file {
				name = pascal(t) // Player.MoveRequested, not the file's player.moverequested
			}
		}
		name += "Payload"
	case "proposals":
		name += "ProposalPayload"
	}
	if def != "" {
		name += pascal(def)
	}
	return name
}

func pascal(s string) string {
	var b strings.Builder
	for part := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '.' || r == '-' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// add makes a component of the schema at file (or of its $defs entry def) and of everything it
// refers to, and returns its name.
func (g *openapiGen) add(file, def string) (string, error) {
	name := componentName(file, def)
	if _, done := g.out[name]; done {
		return name, nil
	}
	raw, err := fs.ReadFile(schemas.FS(), file)
	if err != nil {
		return "", err
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if def != "" {
		defs, _ := s["$defs"].(map[string]any)
		d, ok := defs[def].(map[string]any)
		if !ok {
			return "", fmt.Errorf("%s has no $defs/%s", file, def)
		}
		s = d
	}
	delete(s, "$schema")
	delete(s, "$id")
	delete(s, "$defs") // each entry used becomes a component of its own
	g.out[name] = s
	if err := g.rewrite(s, file); err != nil {
		return "", err
	}
	g.hoist(name, s)
	return name, nil
}

// rewrite turns every $ref under v, relative to file, into a reference to a component.
func (g *openapiGen) rewrite(v any, file string) error {
	switch v := v.(type) {
	case map[string]any:
		if r, ok := v["$ref"].(string); ok {
			target, err := url.Parse(schemas.URI(file))
			if err != nil {
				return err
			}
			u, err := target.Parse(r)
			if err != nil {
				return fmt.Errorf("%s: $ref %s: %w", file, r, err)
			}
			refFile, ok := strings.CutPrefix(u.Scheme+"://"+u.Host+u.Path, schemas.BaseURI)
			def, isDef := strings.CutPrefix(u.Fragment, "/$defs/")
			if !ok || (u.Fragment != "" && (!isDef || strings.Contains(def, "/"))) {
				return fmt.Errorf("%s: $ref %s: only whole schemas and their $defs entries become components", file, r)
			}
			name, err := g.add(refFile, def)
			if err != nil {
				return err
			}
			v["$ref"] = "#/components/schemas/" + name
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if err := g.rewrite(v[k], file); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := g.rewrite(e, file); err != nil {
				return err
			}
		}
	}
	return nil
}

// hoist names each object with properties that a property of s defines inline (recursively):
// the outcome's refusal becomes OutcomeRefusal.
func (g *openapiGen) hoist(name string, s map[string]any) {
	props, _ := s["properties"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(props)) {
		p, _ := props[k].(map[string]any)
		if _, object := p["properties"]; !object {
			continue
		}
		child := name + pascal(k)
		g.out[child] = p
		g.hoist(child, p)
		props[k] = ref(child)
	}
}
