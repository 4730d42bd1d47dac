package llm

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaCache memoizes compiled schemas by the SHA-256 of their text. Agent
// roles use a handful of schemas, so it is small; it is cleared if it ever
// grows past maxCachedSchemas (e.g. a caller generating schemas per call).
var schemaCache sync.Map // [32]byte -> *jsonschema.Schema

var schemaCacheLen struct {
	sync.Mutex
	n int
}

const maxCachedSchemas = 512

// CompileSchema compiles a JSON Schema (draft 2020-12 unless $schema says
// otherwise), memoized by content.
func CompileSchema(schema []byte) (*jsonschema.Schema, error) {
	key := sha256.Sum256(schema)
	if s, ok := schemaCache.Load(key); ok {
		return s.(*jsonschema.Schema), nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "mem://worldgate/llm/schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema cannot be loaded: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %w", err)
	}
	schemaCacheLen.Lock()
	if schemaCacheLen.n >= maxCachedSchemas {
		schemaCache.Clear()
		schemaCacheLen.n = 0
	}
	schemaCacheLen.n++
	schemaCacheLen.Unlock()
	schemaCache.Store(key, s)
	return s, nil
}

// ValidateJSON checks that doc is JSON conforming to schema. The error, if
// any, is a readable description suitable for a repair reprompt.
func ValidateJSON(schema, doc []byte) error {
	s, err := CompileSchema(schema)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("the reply is not a single valid JSON document: %w", err)
	}
	if err := s.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return errors.New(strings.TrimSpace(ve.Error()))
		}
		return err
	}
	return nil
}

// ExtractJSON returns the JSON document inside a model's reply, tolerating a
// Markdown code fence or prose around a single object or array. It returns
// text trimmed when it finds nothing better.
func ExtractJSON(text string) string {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") {
		t = strings.TrimPrefix(t, "```")
		if nl := strings.IndexByte(t, '\n'); nl >= 0 {
			t = t[nl+1:] // drop the info string ("json")
		}
		if end := strings.LastIndex(t, "```"); end >= 0 {
			t = t[:end]
		}
		t = strings.TrimSpace(t)
	}
	if t == "" || t[0] == '{' || t[0] == '[' {
		return t
	}
	start := strings.IndexAny(t, "{[")
	if start < 0 {
		return t
	}
	closer := byte('}')
	if t[start] == '[' {
		closer = ']'
	}
	end := strings.LastIndexByte(t, closer)
	if end <= start {
		return t
	}
	return t[start : end+1]
}
