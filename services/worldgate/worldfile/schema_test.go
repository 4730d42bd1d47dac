package worldfile

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/schemas"
)

// worldSchema compiles schemas/v1/world.json with the other embedded schemas it refers to.
func worldSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c, err := events.SchemaCompiler()
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(schemas.URI(schemas.World))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// yamlAsJSON reads a world file as the JSON document its schema describes.
func yamlAsJSON(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// The world-file format has its own JSON Schema (schemas/v1/world.json, issue 40 item 1): the
// demo world validates against it, broken worlds do not (each for the reason Parse refuses
// them too), and the schema names exactly the fields the loader reads.
func TestWorldFileSchema(t *testing.T) {
	s := worldSchema(t)
	if err := s.Validate(yamlAsJSON(t, Demo())); err != nil {
		t.Fatalf("the demo world does not validate against %s: %v", schemas.World, err)
	}
	broken := map[string]string{
		"unknown field":    "locations:\n  - {id: loc:a, name: A, description: a place, colour: red}\n",
		"missing name":     "npcs:\n  - {id: npc:a, location: loc:a}\n",
		"bad id":           "factions:\n  - {id: wardens, name: The Wardens}\n",
		"bad direction":    "locations:\n  - id: loc:a\n    name: A\n    description: a place\n    exits: [{direction: sideways, to: loc:b}]\n",
		"location, holder": "items:\n  - {id: item:a, name: A, location: loc:a, holder: npc:b}\n",
		"name too long":    "players:\n  - {id: player:a, location: loc:a, name: " + strings.Repeat("x", 81) + "}\n",
	}
	for what, file := range broken {
		if err := s.Validate(yamlAsJSON(t, []byte(file))); err == nil {
			t.Errorf("%s: the schema accepts %q", what, file)
		}
		if _, err := Parse("broken.yaml", []byte(file)); err == nil {
			t.Errorf("%s: the loader accepts %q, which the schema refuses", what, file)
		}
	}

	// The schema's properties are the loader's yaml fields, type by type.
	raw, err := fs.ReadFile(schemas.FS(), schemas.World)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for def, typ := range map[string]reflect.Type{
		"": reflect.TypeFor[World](), "location": reflect.TypeFor[Location](), "exit": reflect.TypeFor[Exit](),
		"faction": reflect.TypeFor[Faction](), "npc": reflect.TypeFor[NPC](), "player": reflect.TypeFor[Player](),
		"item": reflect.TypeFor[Item](), "lore": reflect.TypeFor[Lore](),
	} {
		props := doc.Properties
		if def != "" {
			props = doc.Defs[def].Properties
		}
		var inSchema, inGo []string
		for p := range props {
			inSchema = append(inSchema, p)
		}
		for f := range typ.Fields() {
			if tag := f.Tag.Get("yaml"); tag != "-" {
				inGo = append(inGo, tag)
			}
		}
		slices.Sort(inSchema)
		slices.Sort(inGo)
		if !slices.Equal(inSchema, inGo) {
			t.Errorf("%s: world.json's %q has properties %v, the loader's %s reads %v", schemas.World, def, inSchema, typ.Name(), inGo)
		}
	}
}
