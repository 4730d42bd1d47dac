// Package provenance defines the hashes that make an AI decision replayable: the canonical JSON
// encoding, the hash of a tool's arguments and result, and the context hash. The ai-worker
// computes them when it builds a proposal; the replay gate recomputes them from what the
// proposal recorded. Both must call these functions, so that the definitions cannot drift.
//
// Pure functions, no I/O.
//
// # Definitions (version 1)
//
// Canonical(v): v re-encoded as JSON with object keys sorted by their UTF-8 bytes, no
// whitespace between tokens, numbers exactly as written in the input (never re-formatted),
// strings escaped as Go's encoding/json does with HTML escaping off (", \, control characters,
// U+2028 and U+2029 escaped; other characters as UTF-8), a key given twice with its last value,
// invalid UTF-8 as U+FFFD. This is exactly what decoding with encoding/json (numbers as
// json.Number) and encoding again gives; Canonical writes it in one pass (canonical.go).
//
// ArgsHash(args) and ResultHash(result): lower-case hex SHA-256 of Canonical of the value.
//
// ContextHash(purpose, templateSHA, results, model): lower-case hex SHA-256 of Canonical of the
// JSON array
//
//	["worldgate.context/v1", purpose, templateSHA, model,
//	 [[server, tool, argsHash, result-or-null, error], …]]
//
// with one inner array per tool call in the order the calls were made; result is the tool's
// result as the model saw it (a JSON value, canonicalised), null when the call failed; error is
// the error text given to the model, "" when it succeeded. purpose is the proposal kind (the
// LLM purpose: ambience, npc_dialogue, quest_seed).
package provenance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/worldgate/worldgate/events"
)

// Version names the context-hash definition; it is the first element of the hashed array.
const Version = "worldgate.context/v1"

// ToolResult is one tool call as it entered the model's context.
type ToolResult struct {
	Server   string
	Tool     string
	ArgsHash string
	Result   json.RawMessage // nil when the call failed
	Error    string
}

// ToolResults extracts the context-relevant part of a proposal's recorded tool calls.
func ToolResults(calls []events.ToolCall) []ToolResult {
	out := make([]ToolResult, len(calls))
	for i, c := range calls {
		out[i] = ToolResult{Server: c.Server, Tool: c.Tool, ArgsHash: c.ArgsHash, Result: c.Result, Error: c.Error}
	}
	return out
}

// Canonical returns the canonical encoding of the JSON document raw (see the package doc).
func Canonical(raw []byte) ([]byte, error) {
	return CanonicalWithout(raw, "")
}

// CanonicalWithout is Canonical of raw with the member key of its top-level object left out
// (none when key is ""; raw must then be an object).
func CanonicalWithout(raw []byte, key string) ([]byte, error) {
	if out, ok := canonicalize(raw, key); ok {
		return out, nil
	}
	out, err := reference(raw, key)
	if err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return out, nil
}

// CanonicalValue marshals v to JSON and returns its canonical encoding.
func CanonicalValue(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return Canonical(raw)
}

func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Sum is the lower-case hex SHA-256 of data.
func Sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// ArgsHash is the hash of a tool call's arguments (any value that marshals to JSON).
func ArgsHash(args any) (string, error) {
	c, err := CanonicalValue(args)
	if err != nil {
		return "", err
	}
	return Sum(c), nil
}

// ResultHash is the hash of a tool result given as JSON.
func ResultHash(result json.RawMessage) (string, error) {
	c, err := Canonical(result)
	if err != nil {
		return "", err
	}
	return Sum(c), nil
}

// ContextHash is the hash over everything that went into a model call besides the fixed
// template text: purpose, template SHA-256, the tool results in call order, and the model.
// It fails only on a tool result that is not valid JSON.
func ContextHash(purpose, templateSHA string, results []ToolResult, model string) (string, error) {
	calls := make([]any, len(results))
	for i, r := range results {
		var res any
		if len(r.Result) > 0 {
			dec := json.NewDecoder(bytes.NewReader(r.Result))
			dec.UseNumber()
			if err := dec.Decode(&res); err != nil {
				return "", fmt.Errorf("tool call %d (%s): result is not valid JSON: %w", i+1, r.Tool, err)
			}
		}
		calls[i] = []any{r.Server, r.Tool, r.ArgsHash, res, r.Error}
	}
	c, err := encode([]any{Version, purpose, templateSHA, model, calls})
	if err != nil {
		return "", err
	}
	return Sum(c), nil
}
