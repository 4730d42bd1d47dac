package events

import (
	"encoding/json"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/schemas"
)

// Every proposal kind is defined whole: a domain event, a payload type whose JSON fields are
// exactly its schema's properties (required ones included), and the reads the gates use.
func TestEveryKindHasEachPart(t *testing.T) {
	if len(Kinds()) == 0 {
		t.Fatal("no kinds")
	}
	seen := map[string]bool{}
	for _, k := range Kinds() {
		t.Run(k.Kind, func(t *testing.T) {
			if seen[k.Kind] || seen[k.DomainType] {
				t.Fatalf("kind or domain type defined twice")
			}
			seen[k.Kind], seen[k.DomainType] = true, true
			if k.DomainType == "" {
				t.Error("no domain event type")
			}
			if k.New == nil {
				t.Fatal("no payload type (New)")
			}
			p := k.New()
			rt := reflect.TypeOf(p)
			if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
				t.Fatalf("payload %T is not a pointer to a struct", p)
			}
			if _, ok := compiled().proposals[k.Kind]; !ok {
				t.Fatalf("no compiled schema %s", schemas.ProposalPayload(k.Kind))
			}
			raw, err := fs.ReadFile(schemas.FS(), schemas.ProposalPayload(k.Kind))
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			var fields, required []string
			for i := 0; i < rt.Elem().NumField(); i++ {
				name, opts, _ := strings.Cut(rt.Elem().Field(i).Tag.Get("json"), ",")
				fields = append(fields, name)
				if !strings.Contains(opts, "omitempty") {
					required = append(required, name)
				}
			}
			var props []string
			for name := range doc.Properties {
				props = append(props, name)
			}
			slices.Sort(fields)
			slices.Sort(props)
			if !slices.Equal(fields, props) {
				t.Errorf("Go fields %v, schema properties %v", fields, props)
			}
			for _, r := range doc.Required {
				if !slices.Contains(fields, r) {
					t.Errorf("schema requires %s, which %T lacks", r, p)
				}
			}
			for _, r := range required {
				if !slices.Contains(doc.Required, r) {
					t.Errorf("%T's %s is not omitempty, yet the schema does not require it", p, r)
				}
			}
			if k.PlayerText {
				// A kind whose text reaches players says which text: fill every string field and
				// the content must not be empty.
				fillStrings(reflect.ValueOf(p).Elem())
				if p.Content() == "" {
					t.Errorf("%s carries player text but Content() reads none", k.Kind)
				}
			}
			if k.Destructive && k.PlayerText {
				t.Errorf("a destructive kind carries only an operator's reason")
			}
		})
	}
}

func fillStrings(v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("some text " + v.Type().Field(i).Name)
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.String {
				f.Set(reflect.ValueOf([]string{"a " + v.Type().Field(i).Name}))
			}
		}
	}
}

func TestDecodePayloadIsStrict(t *testing.T) {
	p, err := DecodePayload(KindAmbience, json.RawMessage(`{"locationId":"loc:a","text":"Rain.","mood":"calm"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a := p.(*AmbiencePayload); a.Target() != "loc:a" || a.Content() != "Rain.\ncalm" || !slices.Equal(a.References(), []string{"loc:a"}) {
		t.Fatalf("%+v", a)
	}
	if _, err := DecodePayload(KindAmbience, json.RawMessage(`{"locationId":"loc:a","text":"x","extra":1}`)); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Fatalf("unknown field: %v", err)
	}
	if _, err := DecodePayload("teleport", nil); err == nil || !strings.Contains(err.Error(), "teleport") {
		t.Fatalf("unknown kind: %v", err)
	}
	probs := PayloadRules(&QuestSeedPayload{Title: " ", Hook: "h", Objectives: []string{"a", "a"}}, "/payload")
	var paths []string
	for _, pr := range probs {
		paths = append(paths, pr.Path)
	}
	if !slices.Contains(paths, "/payload/title") || !slices.Contains(paths, "/payload/objectives") {
		t.Fatalf("problems %v", probs)
	}
}

func TestEntityLabels(t *testing.T) {
	for id, want := range map[string]string{"loc:a": "Location", "npc:b": "NPC", "lore:c": "LoreFact", "quest:d": "QuestSeed", "zzz:e": ""} {
		if got := EntityLabel(id); got != want {
			t.Errorf("EntityLabel(%s) = %q, want %q", id, got, want)
		}
	}
	if EntityName("faction:guard") != "faction faction:guard" || EntityName("x") != "x" {
		t.Error(EntityName("faction:guard"))
	}
}
