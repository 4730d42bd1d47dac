package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/edge/edge"
)

// The document served at /openapi.json is a valid OpenAPI 3.1 document, and every answer of
// the real handlers — to good and bad requests — is one it documents (status, content type,
// body schema); every documented operation is exercised.
func TestOpenAPIDocumentMatchesTheHandlers(t *testing.T) {
	e := start(t, nil)
	resp := e.do(t, "GET", "/openapi.json", "", "", "")
	served, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(served, edge.OpenAPI()) {
		t.Fatal("/openapi.json is not the embedded document")
	}
	// NDJSON is one envelope per line: the document describes it as a string.
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(r)
		return string(b), err
	})
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(served)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("invalid OpenAPI document: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: e.srv.URL}} // where this test's edge listens
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	good, env := envelopeJSON(t, "player:ada")
	_, other := envelopeJSON(t, "player:ada")
	other.IdempotencyKey = env.IdempotencyKey
	b, _ := json.Marshal(other)
	reused := string(b)
	o := publishOutcome(t, e, "player:ada", "no exit west")
	_, never := envelopeJSON(t, "player:ada") // never published: unknown
	_, skipped := envelopeJSON(t, "player:ada")
	if _, err := events.Publish(context.Background(), e.nats.JS, skipped); err != nil {
		t.Fatal(err)
	}
	skip := events.SkippedOutcome(skipped, "npc-dialogue", "loc:tavern", "TEST_SKIP", "not acted on", time.Minute, time.Now())
	sb, _ := skip.Encode()
	if _, err := e.nats.JS.Publish(context.Background(), skip.Subject(), sb); err != nil {
		t.Fatal(err)
	}
	// A committed NPC line: its domain event's payload is one of the proposal payloads the
	// document types (anyOf), gates and cost in its journey.
	_, spoken := envelopeJSON(t, "player:ada")
	if _, err := events.Publish(context.Background(), e.nats.JS, spoken); err != nil {
		t.Fatal(err)
	}
	line := &events.Proposal{ProposalID: "p-openapi-line", Kind: events.KindNPCDialogue, CorrelationID: spoken.CorrelationID, CausationID: spoken.EventID,
		AgentRole: "npc-dialogue", Actor: spoken.Actor, Attempt: 1,
		Payload:    json.RawMessage(`{"npcId":"npc:oren","playerId":"player:ada","locationId":"loc:tavern","line":"Ale's warm, news is cold.","intent":"greet"}`),
		Provenance: &events.Provenance{Provider: "scripted", Model: "scripted-small", Tokens: events.Tokens{Prompt: 120, Completion: 30}, CostUSD: 0.0001},
		Route:      events.Route{Trail: []events.Hop{{Gate: "schema", Outcome: "passed", At: time.Now(), DurationMs: 0.4}}}}
	committed := events.CommittedOutcome(line, events.DomainEvent{EventID: "0190a8f0-0000-5000-8000-0000000000c1", Type: "NPCDialogueAccepted",
		ProposalID: line.ProposalID, Kind: line.Kind, CorrelationID: line.CorrelationID, OccurredUTC: time.Now(), CommittedUTC: time.Now(), Payload: line.Payload})
	cb, _ := committed.Encode()
	if _, err := e.nats.JS.Publish(context.Background(), committed.Subject(), cb); err != nil {
		t.Fatal(err)
	}
	attempts := publishAttempts(t, e, "player:ada") // a refused attempt, then a committed one
	exercised := map[string]bool{}
	type call struct {
		method, path, key, ct, body string
		hdr                         []string
		validRequest                bool
		stream                      bool
	}
	calls := []call{
		{"POST", "/v1/events", allKey, "application/json", good, []string{"Idempotency-Key", "k-1"}, true, false},
		{"POST", "/v1/events", allKey, "application/x-ndjson", good + "\n", nil, true, false},
		{"POST", "/v1/events", allKey, "application/json", good, nil, true, false},   // again: a duplicate
		{"POST", "/v1/events", allKey, "application/json", reused, nil, true, false}, // its key, another body: 409
		{"POST", "/v1/events", allKey, "application/json", `{"x":1}`, nil, false, false},
		{"POST", "/v1/events", allKey, "text/plain", "hello", nil, false, false},
		{"POST", "/v1/events", "", "application/json", good, nil, true, false}, // well-formed; the key is what is missing
		{"POST", "/v1/events", adaKey, "application/json", good, nil, true, false},
		{"GET", "/v1/events/" + o.EventID + "/outcome?wait=2", allKey, "", "", nil, true, false},
		{"GET", "/v1/events/" + env.EventID + "/outcome?wait=0.2", allKey, "", "", nil, true, false},
		{"GET", "/v1/events/" + env.EventID + "/outcome?wait=0", allKey, "", "", nil, true, false},
		{"GET", "/v1/events/nope/outcome", allKey, "", "", nil, false, false},
		{"GET", "/v1/events/" + never.EventID + "/outcome?wait=1", allKey, "", "", nil, true, false},
		{"GET", "/v1/events/" + skipped.EventID + "/outcome?wait=2", allKey, "", "", nil, true, false},
		{"GET", "/v1/events/" + spoken.EventID + "/outcome?wait=2", allKey, "", "", nil, true, false},
		{"GET", "/v1/events/" + attempts.EventID + "/journey", allKey, "", "", nil, true, false},
		{"GET", "/v1/events/" + never.EventID + "/journey", allKey, "", "", nil, true, false},
		{"GET", "/v1/events/nope/journey", allKey, "", "", nil, false, false},
		{"GET", "/v1/outcomes?kind=refused&actor=player:ada&after=0", allKey, "", "", nil, true, true},
		{"GET", "/v1/outcomes?kind=maybe", allKey, "", "", nil, false, false},
		{"GET", "/v1/outcomes", adaKey, "", "", []string{"Last-Event-ID", "1"}, true, true},
		{"GET", "/openapi.json", "", "", "", nil, true, false},
	}
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, c.method, e.srv.URL+c.path, strings.NewReader(c.body))
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		if c.ct != "" {
			req.Header.Set("Content-Type", c.ct)
		}
		for i := 0; i+1 < len(c.hdr); i += 2 {
			req.Header.Set(c.hdr[i], c.hdr[i+1])
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s %s is not in the document: %v", c.method, c.path, err)
		}
		exercised[c.method+" "+route.Path] = true
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, ExcludeResponseBody: c.stream}}
		// Validate a copy of the request: validation consumes the body.
		vreq := req.Clone(ctx)
		vreq.Body = io.NopCloser(strings.NewReader(c.body))
		in.Request = vreq
		if err := openapi3filter.ValidateRequest(ctx, in); (err == nil) != c.validRequest {
			t.Errorf("%s %s (%s %.20s): request validation error %v, want valid=%v", c.method, c.path, c.ct, c.body, err, c.validRequest)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body []byte
		if !c.stream {
			body, _ = io.ReadAll(resp.Body)
		}
		cancel()
		resp.Body.Close()
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
			Body: io.NopCloser(bytes.NewReader(body)), Options: in.Options}
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("%s %s answered %d, which the document does not describe: %v\n%s", c.method, c.path, resp.StatusCode, err, body)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !exercised[method+" "+path] {
				t.Errorf("documented operation %s %s is not exercised", method, path)
			}
		}
	}
}

// openapi.json is generated from openapi.base.json and the JSON Schemas (issue 40 item 4): one
// definition, so a schema changed without `go generate` here fails this test.
func TestOpenAPIIsGenerated(t *testing.T) {
	base, err := os.ReadFile("openapi.base.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := edge.GenerateOpenAPI(base)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, edge.OpenAPI()) {
		t.Fatal("openapi.json is not what openapi.base.json and schemas/v1 generate: run `go generate` in services/edge/edge")
	}
}

// Every schema of the document is deep enough to generate a client from (issue 40 item 4):
// no object is bare (openapi-typescript makes `{"type":"object"}` a Record<string, never>
// that refuses every payload), the API's messages are components of their own, and the
// document names its servers.
func TestOpenAPISchemasAreTyped(t *testing.T) {
	var doc struct {
		Servers    []struct{ URL string } `json:"servers"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(edge.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) == 0 || doc.Servers[0].URL == "" {
		t.Error("the document names no server")
	}
	for _, name := range []string{"Envelope", "Actor", "Outcome", "OutcomeRefusal", "OutcomeSkip", "OutcomeJourney", "DomainEvent",
		"PlayerMovedPayload", "PlayerSpokeToNPCPayload", "NpcDialogueProposalPayload", "ProposalHop"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("no component %s", name)
		}
	}
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "object" && v["properties"] == nil && v["anyOf"] == nil && v["oneOf"] == nil && v["additionalProperties"] == nil {
				t.Errorf("%s is a bare object", where)
			}
			for k, e := range v {
				walk(where+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", where, i), e)
			}
		}
	}
	walk("#/components/schemas", doc.Components.Schemas)
	walk("#/paths", doc.Paths)
}
