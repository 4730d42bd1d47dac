package edge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	sse "github.com/tmaxmax/go-sse"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/edge/edge"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

const (
	allKey     = "all-secret-0000000000"
	adaKey     = "ada-secret-0000000000"
	publishKey = "pub-secret-0000000000"
	slowKey    = "slow-secret-000000000"
	adaOnlyKey = "ada-only-secret-00000" // a player key: acts only for player:ada
)

type env struct {
	nats *natstest.Env
	srv  *httptest.Server
	edge *edge.Server
	reg  *prometheus.Registry
}

func start(t testing.TB, tweak func(*edge.Config)) *env {
	t.Helper()
	n := natstest.Start(t)
	ring, err := edge.NewKeyring([]edge.Key{
		{Name: "game", Secret: allKey, Scopes: []string{"publish", "read:all"}, Rate: 1000},
		{Name: "ada-client", SHA256: edge.HashSecret(adaKey), Scopes: []string{"read:player:ada"}, Rate: 1000},
		{Name: "publisher-only", Secret: publishKey, Scopes: []string{"publish"}, Rate: 1000},
		{Name: "slow", Secret: slowKey, Scopes: []string{"publish", "read:all"}, Rate: 1, Burst: 1},
		edge.PlayerKey("ada-console", adaOnlyKey, "player:ada"),
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := edge.Config{JetStream: n.JS, Keys: ring, Registerer: reg, CORSOrigins: []string{"https://game.example"}}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := edge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Shutdown(); srv.Close() })
	return &env{nats: n, srv: srv, edge: s, reg: reg}
}

func (e *env) do(t *testing.T, method, path, key, ct string, body string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func envelopeJSON(t *testing.T, player string) (string, *events.Envelope) {
	t.Helper()
	env, err := events.NewEnvelope(events.PlayerSpokeToNPC, "test/edge", events.Actor{Kind: "player", ID: player},
		events.PlayerSpokeToNPCPayload{PlayerID: player, NPCID: "npc:oren", LocationID: "loc:tavern", Utterance: "<b>hi</b>"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(env)
	return string(b), env
}

type problemDoc struct {
	Status int `json:"status"`
	Errors []struct {
		Field   string `json:"field"`
		Line    int    `json:"line"`
		Message string `json:"message"`
	} `json:"errors"`
}

func readProblem(t *testing.T, resp *http.Response) problemDoc {
	t.Helper()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, content type %q, want application/problem+json: %s", resp.StatusCode, ct, b)
	}
	var p problemDoc
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every bad input gets a 4xx problem naming the field, and nothing is published.
func TestPublishBadInputNamesTheFieldAndPublishesNothing(t *testing.T) {
	e := start(t, nil)
	good, _ := envelopeJSON(t, "player:ada")
	var m map[string]any
	_ = json.Unmarshal([]byte(good), &m)
	with := func(f func(map[string]any)) string {
		c := map[string]any{}
		b, _ := json.Marshal(m)
		_ = json.Unmarshal(b, &c)
		f(c)
		out, _ := json.Marshal(c)
		return string(out)
	}
	cases := []struct {
		name, key, ct, body string
		hdr                 []string
		status              int
		field               string
	}{
		{"missing key", "", "application/json", good, nil, 401, "Authorization"},
		{"unknown key", "nope-nope-nope-nope-nope", "application/json", good, nil, 401, "Authorization"},
		{"read-only key", adaKey, "application/json", good, nil, 403, "Authorization"},
		{"wrong content type", allKey, "text/plain", good, nil, 415, "Content-Type"},
		{"malformed json", allKey, "application/json", `{"specVersion": "1.0",`, nil, 400, "body"},
		{"empty body", allKey, "application/json", ``, nil, 400, "body"},
		{"oversized body", allKey, "application/json", `{"pad":"` + strings.Repeat("x", events.DefaultMaxBytes) + `"}`, nil, 413, "body"},
		{"unknown field", allKey, "application/json", with(func(c map[string]any) { c["color"] = "red" }), nil, 400, "/color"},
		{"unknown event type", allKey, "application/json", with(func(c map[string]any) { c["type"] = "Player.Flew" }), nil, 400, "/type"},
		{"missing field", allKey, "application/json", with(func(c map[string]any) { delete(c, "source") }), nil, 400, "/source"},
		{"bad payload", allKey, "application/json", with(func(c map[string]any) { c["payload"].(map[string]any)["npcId"] = "oren" }), nil, 400, "/payload/npcId"},
		{"bad idempotency key", allKey, "application/json", good, []string{"Idempotency-Key", "has spaces"}, 400, "Idempotency-Key"},
		{"idempotency key not the envelope's", allKey, "application/json", good, []string{"Idempotency-Key", "order-17"}, 400, "Idempotency-Key"},
		{"idempotency key on a batch", allKey, "application/x-ndjson", good + "\n", []string{"Idempotency-Key", "batch-1"}, 400, "Idempotency-Key"},
		{"ndjson with one bad line", allKey, "application/x-ndjson", good + "\n" + with(func(c map[string]any) { c["extra"] = 1 }) + "\n", nil, 400, "/extra"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := e.do(t, "POST", "/v1/events", c.key, c.ct, c.body, c.hdr...)
			if resp.StatusCode != c.status {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, b)
			}
			p := readProblem(t, resp)
			found := false
			for _, fe := range p.Errors {
				found = found || fe.Field == c.field
			}
			if !found || p.Status != c.status {
				t.Fatalf("problem %+v does not name %s", p, c.field)
			}
		})
	}
	if n := natstest.StreamMsgs(t, e.nats.JS, events.StreamWorld, ""); n != 0 {
		t.Fatalf("%d events were published from bad requests", n)
	}
	// The batch's bad line is named with its line number.
	p := readProblem(t, e.do(t, "POST", "/v1/events", allKey, "application/x-ndjson", good+"\n\n"+with(func(c map[string]any) { c["extra"] = 1 })))
	if p.Errors[0].Line != 3 {
		t.Fatalf("bad line reported as %d, want 3: %+v", p.Errors[0].Line, p)
	}
}

func TestPublishIdempotencyBatchAndRateLimit(t *testing.T) {
	e := start(t, nil)
	body, env := envelopeJSON(t, "player:ada")
	for i, wantDup := range []bool{false, true} {
		resp := e.do(t, "POST", "/v1/events", allKey, "application/json", body, "Idempotency-Key", env.IdempotencyKey)
		var out struct {
			EventID  string          `json:"eventId"`
			Accepted []edge.Accepted `json:"accepted"`
		}
		if resp.StatusCode != 202 || json.NewDecoder(resp.Body).Decode(&out) != nil || out.EventID != env.EventID || out.Accepted[0].Duplicate != wantDup {
			t.Fatalf("publish %d: status %d %+v", i, resp.StatusCode, out)
		}
		resp.Body.Close()
	}
	msg, err := e.nats.JS.Stream(context.Background(), events.StreamWorld)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := msg.GetLastMsgForSubject(context.Background(), events.Subject(events.PlayerSpokeToNPC))
	if err != nil || raw.Header.Get(nats.MsgIdHdr) != env.IdempotencyKey {
		t.Fatalf("stored message: %v %v", err, raw)
	}
	b1, _ := envelopeJSON(t, "player:bo")
	b2, _ := envelopeJSON(t, "player:cy")
	resp := e.do(t, "POST", "/v1/events", publishKey, "application/x-ndjson; charset=utf-8", b1+"\n"+b2+"\n")
	if resp.StatusCode != 202 {
		t.Fatalf("batch: %d", resp.StatusCode)
	}
	if n := natstest.StreamMsgs(t, e.nats.JS, events.StreamWorld, ""); n != 3 {
		t.Fatalf("%d events in WORLD, want 3", n)
	}
	// Rate 1/s, burst 1: the second request at once is refused with Retry-After.
	e.do(t, "POST", "/v1/events", slowKey, "application/json", b1).Body.Close()
	resp = e.do(t, "POST", "/v1/events", slowKey, "application/json", b1)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the rate: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	readProblem(t, resp)
	// CORS: the configured origin may call; another may not.
	pre := func(origin string) string {
		req, _ := http.NewRequest("OPTIONS", e.srv.URL+"/v1/events", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.Header.Get("Access-Control-Allow-Origin")
	}
	if pre("https://game.example") != "https://game.example" || pre("https://evil.example") != "" {
		t.Fatal("CORS does not follow the configured origins")
	}
}

// publishOutcome stores an outcome as the pipeline would.
func publishOutcome(t *testing.T, e *env, player string, text string) *events.Outcome {
	t.Helper()
	_, env := envelopeJSON(t, player)
	o := events.RequestRefused(env, "world-rules", "loc:tavern", events.CodeMoveRefused, text, time.Now())
	b, _ := json.Marshal(o)
	m := &nats.Msg{Subject: o.Subject(), Data: b, Header: nats.Header{}}
	if _, err := e.nats.JS.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return o
}

type sseClient struct {
	resp   *http.Response
	next   func() (sse.Event, error, bool)
	cancel context.CancelFunc
}

func (e *env) stream(t *testing.T, key, query, lastID string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/outcomes"+query, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		cancel()
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	next, stop := iterPull(sse.Read(resp.Body, nil))
	t.Cleanup(func() { stop(); cancel(); resp.Body.Close() })
	return &sseClient{resp: resp, next: next, cancel: cancel}
}

func (c *sseClient) outcome(t *testing.T) (string, *events.Outcome) {
	t.Helper()
	ev, err, ok := c.next()
	if !ok || err != nil {
		t.Fatalf("stream ended: %v", err)
	}
	if ev.Type != "outcome" {
		t.Fatalf("event %q: %s", ev.Type, ev.Data)
	}
	o, err := events.DecodeOutcome([]byte(ev.Data))
	if err != nil {
		t.Fatal(err)
	}
	return ev.LastEventID, o
}

// An actor-limited key sees only its actor; a resumed stream loses nothing and repeats nothing
// it acknowledged.
func TestSSEFiltersScopesAndResume(t *testing.T) {
	e := start(t, nil)
	ada := e.stream(t, adaKey, "", "")
	all := e.stream(t, allKey, "?kind=refused", "")
	var want []*events.Outcome
	for i := range 6 {
		player := "player:ada"
		if i%2 == 1 {
			player = "player:bo"
		}
		o := publishOutcome(t, e, player, fmt.Sprintf("line %d", i))
		if player == "player:ada" {
			want = append(want, o)
		}
	}
	id, first := ada.outcome(t)
	if first.OutcomeID != want[0].OutcomeID {
		t.Fatalf("first: %+v", first)
	}
	ada.cancel() // the client goes away after the first
	resumed := e.stream(t, adaKey, "", id)
	for _, w := range want[1:] {
		if _, o := resumed.outcome(t); o.OutcomeID != w.OutcomeID {
			t.Fatalf("resumed stream delivered %s, want %s", o.Refusal.Reason, w.Refusal.Reason)
		}
	}
	for i := range 6 {
		if _, o := all.outcome(t); o.Refusal.Reason != fmt.Sprintf("line %d", i) {
			t.Fatalf("read:all stream %d: %+v", i, o.Refusal)
		}
	}
	// Bad filters and scopes.
	for _, c := range []struct {
		key, query string
		hdr        []string
		status     int
		field      string
	}{
		{adaKey, "?actor=player:bo", nil, 403, "actor"},
		{allKey, "?kind=maybe", nil, 400, "kind"},
		{allKey, "?since=yesterday", nil, 400, "since"},
		{allKey, "?colour=red", nil, 400, "colour"},
		{allKey, "", []string{"Last-Event-ID", "abc"}, 400, "Last-Event-ID"},
		{publishKey, "", nil, 403, "Authorization"},
		{"", "", nil, 401, "Authorization"},
	} {
		p := readProblem(t, e.do(t, "GET", "/v1/outcomes"+c.query, c.key, "", "", c.hdr...))
		if p.Status != c.status || len(p.Errors) == 0 || p.Errors[0].Field != c.field {
			t.Errorf("GET /v1/outcomes%s: %+v, want %d naming %s", c.query, p, c.status, c.field)
		}
	}
}

// A client that stops reading is dropped once its buffer is full; the others get everything.
func TestSlowSSEClientIsDroppedOthersAreNot(t *testing.T) {
	e := start(t, func(c *edge.Config) { c.SSEBuffer = 4; c.WriteTimeout = 200 * time.Millisecond })
	// The slow client: a raw connection with a small receive buffer that sends its request
	// and never reads.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		// Before the handshake, so the advertised window stays small.
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/outcomes HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer %s\r\n\r\n", allKey)
	natstest.WaitFor(t, 5*time.Second, "the slow stream open", func() bool { return gauge(e, "worldgate_edge_sse_streams") == 1 })
	fast := e.stream(t, allKey, "", "")
	const n = 6000
	pad := strings.Repeat("z", 1900) // 6000 × ~2.5 KB: far more than the socket buffers hold
	done := make(chan int)
	go func() {
		got := 0
		for got < n {
			ev, err, ok := fast.next()
			if !ok || err != nil || ev.Type != "outcome" {
				break
			}
			got++
		}
		done <- got
	}()
	for i := range n {
		publishOutcome(t, e, "player:ada", fmt.Sprint(i, pad))
	}
	if got := <-done; got != n {
		t.Fatalf("the fast client got %d of %d", got, n)
	}
	natstest.WaitFor(t, 20*time.Second, "the slow client dropped", func() bool {
		return gauge(e, "worldgate_edge_sse_dropped_total") >= 1
	})
	natstest.WaitFor(t, 10*time.Second, "the slow stream closed", func() bool { return gauge(e, "worldgate_edge_sse_streams") <= 1 })
}

// gauge reads the value of a metric without labels.
func gauge(e *env, name string) float64 {
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

func TestLongPollOutcome(t *testing.T) {
	e := start(t, nil)
	o := publishOutcome(t, e, "player:ada", "no exit west")
	resp := e.do(t, "GET", "/v1/events/"+o.EventID+"/outcome?wait=5", adaKey, "", "")
	var out edge.OutcomeResponse
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil || out.Outcomes[0].OutcomeID != o.OutcomeID {
		t.Fatalf("long poll: %d %+v", resp.StatusCode, out)
	}
	resp.Body.Close()
	// Another actor's outcome is invisible to ada's key: to it, the event is unknown.
	bo := publishOutcome(t, e, "player:bo", "nope")
	if p := readProblem(t, e.do(t, "GET", "/v1/events/"+bo.EventID+"/outcome?wait=0.3", adaKey, "", "")); p.Status != 404 {
		t.Fatalf("other actor's outcome: %+v", p)
	}
	// Pending, skipped and unknown are told apart (issue 40 item 3). A stored event with no
	// outcome yet: 204, ask again.
	ctx := context.Background()
	_, pending := envelopeJSON(t, "player:ada")
	if _, err := events.Publish(ctx, e.nats.JS, pending); err != nil {
		t.Fatal(err)
	}
	if resp := e.do(t, "GET", "/v1/events/"+pending.EventID+"/outcome?wait=0.5", adaKey, "", ""); resp.StatusCode != 204 || resp.Header.Get("Retry-After") != "0" {
		t.Fatalf("pending event: %d, want 204 with Retry-After 0", resp.StatusCode)
	}
	// The same event, which the role decided not to act on: 200, skipped, with the reason.
	skip := events.SkippedOutcome(pending, "ambience", "loc:tavern", events.CodeAmbienceFresh, "loc:tavern has fresh ambience", time.Minute, time.Now())
	b, _ := skip.Encode()
	if _, err := e.nats.JS.Publish(ctx, skip.Subject(), b); err != nil {
		t.Fatal(err)
	}
	resp = e.do(t, "GET", "/v1/events/"+pending.EventID+"/outcome?wait=5", adaKey, "", "")
	out = edge.OutcomeResponse{}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil || out.Outcomes[0].Kind != events.OutcomeSkipped ||
		out.Outcomes[0].Skip.Reason != "loc:tavern has fresh ambience" || out.Outcomes[0].Skip.RetryAfter != 60 {
		t.Fatalf("skipped event: %d %+v", resp.StatusCode, out)
	}
	resp.Body.Close()
	// An event never published: 404 at once, whatever the wait, with a sentence.
	_, never := envelopeJSON(t, "player:ada")
	began := time.Now()
	p := readProblem(t, e.do(t, "GET", "/v1/events/"+never.EventID+"/outcome?wait=20", adaKey, "", ""))
	if p.Status != 404 || len(p.Errors) == 0 || p.Errors[0].Field != "id" || !strings.Contains(p.Errors[0].Message, "never published") || time.Since(began) > 5*time.Second {
		t.Fatalf("unknown event: %+v after %s, want 404 at once naming id", p, time.Since(began))
	}
	// Bo's stored event is unknown to ada's key too (no leak of who played what).
	_, bos := envelopeJSON(t, "player:bo")
	if _, err := events.Publish(ctx, e.nats.JS, bos); err != nil {
		t.Fatal(err)
	}
	if p := readProblem(t, e.do(t, "GET", "/v1/events/"+bos.EventID+"/outcome?wait=0.5", adaKey, "", "")); p.Status != 404 {
		t.Fatalf("bo's event through ada's key: %+v", p)
	}
	if resp := e.do(t, "GET", "/v1/events/"+bos.EventID+"/outcome?wait=0.3", allKey, "", ""); resp.StatusCode != 204 {
		t.Fatalf("bo's event through a key that reads all: %d, want 204 (pending)", resp.StatusCode)
	}
	for _, c := range []struct{ path, field string }{
		{"/v1/events/not-a-uuid/outcome", "id"},
		{"/v1/events/" + o.EventID + "/outcome?wait=999", "wait"},
		{"/v1/events/" + o.EventID + "/outcome?wait=soon", "wait"},
		{"/v1/events/" + o.EventID + "/outcome?x=1", "x"},
	} {
		p := readProblem(t, e.do(t, "GET", c.path, allKey, "", ""))
		if p.Status != 400 || p.Errors[0].Field != c.field {
			t.Errorf("%s: %+v, want 400 naming %s", c.path, p, c.field)
		}
	}
}
