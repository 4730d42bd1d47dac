package server_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/graphd/server"
)

// raw is a bare WebSocket client speaking GraphBinary, for protocol tests.
type raw struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialRaw(t *testing.T, srv *server.Server) *raw {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &raw{t: t, ws: ws}
}

func (r *raw) sendFrame(b []byte) {
	r.t.Helper()
	if err := r.ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) request(id uuid.UUID, op, processor string, args ...gb.MapEntry) {
	r.t.Helper()
	f, err := gb.WriteRequest(&gb.Request{ID: id, Op: op, Processor: processor, Args: &gb.Map{Entries: args}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.sendFrame(f)
}

type rawResp struct {
	id     uuid.UUID
	code   int32
	msg    string
	data   any
	nullID bool
}

func (r *raw) read() rawResp {
	r.t.Helper()
	_ = r.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := r.ws.ReadMessage()
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	rd := gb.NewReader(msg)
	var out rawResp
	if len(msg) < 2 || msg[0] != 0x81 {
		r.t.Fatalf("bad version byte: %x", msg)
	}
	out.nullID = msg[1] != 0
	rd2 := gb.NewReader(msg[2:])
	if out.id, err = rd2.UUID(); err != nil {
		r.t.Fatal(err)
	}
	rest := msg[18:]
	code := gb.NewReader(rest)
	v, _ := code.Unqualified(gb.TypeInt)
	out.code = v.(int32)
	rest = rest[4:]
	if rest[0] == 0 {
		s, _ := gb.NewReader(rest[1:]).String()
		out.msg = s
		rest = rest[1+4+len(s):]
	} else {
		rest = rest[1:]
	}
	rr := gb.NewReader(rest)
	for i := 0; i < 2; i++ { // attributes, meta
		if _, err := rr.Unqualified(gb.TypeMap); err != nil {
			r.t.Fatal(err)
		}
	}
	if out.data, err = rr.Value(); err != nil {
		r.t.Fatal(err)
	}
	_ = rd
	return out
}

func bytecodeArg(steps ...gb.Instruction) gb.MapEntry {
	return gb.MapEntry{Key: "gremlin", Value: &gb.Bytecode{Steps: steps}}
}

func TestProtocolErrors(t *testing.T) {
	srv := graphdtest.Start(t, graphdtest.InMemory(), graphdtest.WithoutAuth(), graphdtest.WithConfig(func(c *server.Config) {
		c.MaxFrameBytes = 64 << 10
		c.MaxResults = 10_000
		c.TraversalTimeout = 300 * time.Millisecond
	}))
	g := writer(t, srv) // a well-behaved client alongside
	mustIterate(t, g.AddV("x").Property("k", "v"))
	r := dialRaw(t, srv)

	check := func(name string, wantCode int32, wantMsg string, wantID uuid.UUID) {
		t.Helper()
		resp := r.read()
		if resp.nullID {
			t.Errorf("%s: null request id", name)
		}
		if resp.code != wantCode || !strings.Contains(resp.msg, wantMsg) {
			t.Errorf("%s: got %d %q, want %d containing %q", name, resp.code, resp.msg, wantCode, wantMsg)
		}
		if wantID != uuid.Nil && resp.id != wantID {
			t.Errorf("%s: answered under %v, want %v", name, resp.id, wantID)
		}
	}

	id := uuid.New()
	r.request(id, "eval", "", gb.MapEntry{Key: "gremlin", Value: "g.V()"})
	check("eval", 499, "scripts are not supported", id)

	id = uuid.New()
	r.request(id, "frobnicate", "traversal")
	check("unknown op", 499, "unknown op", id)

	id = uuid.New()
	r.request(id, "bytecode", "session", bytecodeArg(gb.Instruction{Op: "V"}))
	check("session without an id", 499, "needs a session argument", id)

	id = uuid.New()
	r.request(id, "bytecode", "traversal", gb.MapEntry{Key: "gremlin", Value: &gb.Bytecode{Sources: []gb.Instruction{{Op: "tx", Args: []any{"commit"}}}}})
	check("commit without a session", 499, "needs a session", id)

	id = uuid.New()
	r.request(id, "bytecode", "cluster", bytecodeArg(gb.Instruction{Op: "V"}))
	check("unknown processor", 499, "processor \"cluster\" is not supported", id)

	id = uuid.New()
	r.request(id, "bytecode", "traversal")
	check("missing gremlin", 499, "gremlin", id)

	id = uuid.New()
	r.request(id, "bytecode", "traversal", bytecodeArg(gb.Instruction{Op: "V"}),
		gb.MapEntry{Key: "aliases", Value: &gb.Map{Entries: []gb.MapEntry{{Key: "g", Value: "other"}}}})
	check("alias", 499, "traversal source", id)

	// unknown type code inside the args
	id = uuid.New()
	f, _ := gb.WriteRequest(&gb.Request{ID: id, Op: "bytecode", Processor: "traversal", Args: &gb.Map{}})
	f = f[:len(f)-4]
	f = append(f, 0, 0, 0, 1, gb.TypeString, 0, 0, 0, 0, 1, 'k', 0x77, 0x00)
	r.sendFrame(f)
	check("unknown type", 497, "unknown or unsupported type code 0x77", id)

	// truncated frame
	id = uuid.New()
	f, _ = gb.WriteRequest(&gb.Request{ID: id, Op: "bytecode", Processor: "traversal", Args: &gb.Map{Entries: []gb.MapEntry{bytecodeArg(gb.Instruction{Op: "V"})}}})
	r.sendFrame(f[:len(f)-3])
	check("truncated", 497, "truncated", id)

	// garbage too short to carry an id: answered, never with a null id
	r.sendFrame([]byte{1, 2, 3})
	check("garbage", 498, "malformed", uuid.Nil)

	// oversized frame: answered under its id, connection survives
	id = uuid.New()
	big := bytes.Repeat([]byte{'x'}, 100<<10)
	r.request(id, "bytecode", "traversal", bytecodeArg(gb.Instruction{Op: "inject", Args: []any{string(big)}}))
	check("oversized", 498, "exceeds", id)

	// runaway traversals hit the result and time limits
	id = uuid.New()
	r.request(id, "bytecode", "traversal", bytecodeArg(
		gb.Instruction{Op: "inject", Args: []any{int64(1)}},
		gb.Instruction{Op: "repeat", Args: []any{&gb.Bytecode{Steps: []gb.Instruction{{Op: "union", Args: []any{
			&gb.Bytecode{Steps: []gb.Instruction{{Op: "identity"}}}, &gb.Bytecode{Steps: []gb.Instruction{{Op: "identity"}}}}}}}}},
		gb.Instruction{Op: "times", Args: []any{int64(40)}},
	))
	check("result limit", 597, "result limit", id)

	id = uuid.New()
	r.request(id, "bytecode", "traversal", bytecodeArg(
		gb.Instruction{Op: "inject", Args: []any{int64(1)}},
		gb.Instruction{Op: "repeat", Args: []any{&gb.Bytecode{Steps: []gb.Instruction{{Op: "identity"}}}}},
	))
	check("timeout", 598, "timeout", id)

	// unsupported step is named
	id = uuid.New()
	r.request(id, "bytecode", "traversal", bytecodeArg(gb.Instruction{Op: "V"}, gb.Instruction{Op: "shortestPath"}))
	check("unsupported", 597, "shortestPath", id)

	// a lambda is refused
	id = uuid.New()
	r.request(id, "bytecode", "traversal", bytecodeArg(gb.Instruction{Op: "V"}, gb.Instruction{Op: "map", Args: []any{&gb.Lambda{Language: "gremlin-groovy", Script: "it"}}}))
	check("lambda", 597, "lambda", id)

	// the raw connection still works, and so does the gremlin-go client
	id = uuid.New()
	r.request(id, "bytecode", "traversal", bytecodeArg(gb.Instruction{Op: "V"}, gb.Instruction{Op: "count"}))
	resp := r.read()
	if resp.code != 200 || resp.id != id {
		t.Fatalf("after errors: %+v", resp)
	}
	if got := one(t, g.V().Count()); got != "1" {
		t.Errorf("other connection: %v", got)
	}
}

func TestPartialBatches(t *testing.T) {
	srv := graphdtest.Start(t, graphdtest.InMemory(), graphdtest.WithoutAuth(), graphdtest.WithConfig(func(c *server.Config) { c.BatchSize = 10 }))
	r := dialRaw(t, srv)
	vals := make([]any, 25)
	for i := range vals {
		vals[i] = int64(i)
	}
	id := uuid.New()
	r.request(id, "bytecode", "traversal", bytecodeArg(gb.Instruction{Op: "inject", Args: vals}))
	var codes []int32
	total := 0
	for {
		resp := r.read()
		if resp.id != id {
			t.Fatalf("wrong id %v", resp.id)
		}
		codes = append(codes, resp.code)
		total += len(resp.data.([]any))
		if resp.code != 206 {
			break
		}
	}
	if len(codes) != 3 || codes[0] != 206 || codes[1] != 206 || codes[2] != 200 || total != 25 {
		t.Errorf("codes %v total %d", codes, total)
	}
	// empty → 204
	id = uuid.New()
	r.request(id, "bytecode", "traversal", bytecodeArg(gb.Instruction{Op: "V"}))
	if resp := r.read(); resp.code != 204 || resp.id != id {
		t.Errorf("empty: %+v", resp)
	}
	// ping is answered with pong
	pong := make(chan struct{}, 1)
	r.ws.SetPongHandler(func(string) error { pong <- struct{}{}; return nil })
	if err := r.ws.WriteControl(websocket.PingMessage, []byte("hi"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	id = uuid.New()
	r.request(id, "bytecode", "traversal", bytecodeArg(gb.Instruction{Op: "inject", Args: []any{"x"}}))
	r.read() // pong handler runs inside read
	select {
	case <-pong:
	default:
		t.Error("no pong")
	}
}

func TestSASLChallengeUsesOriginalID(t *testing.T) {
	srv := graphdtest.Start(t, graphdtest.InMemory())
	r := dialRaw(t, srv)
	id := uuid.New()
	r.request(id, "bytecode", "traversal", bytecodeArg(gb.Instruction{Op: "inject", Args: []any{"hello"}}))
	if resp := r.read(); resp.code != 407 || resp.id != id {
		t.Fatalf("challenge: %+v", resp)
	}
	sasl := "AHJlYWRlcgByZWFkZXItZGV2" // \0reader\0reader-dev
	r.request(uuid.New(), "authentication", "traversal", gb.MapEntry{Key: "sasl", Value: sasl})
	resp := r.read()
	if resp.code != 200 || resp.id != id {
		t.Fatalf("after auth: %+v", resp)
	}
	// wrong password on a fresh connection → 401 under the original id
	r2 := dialRaw(t, srv)
	id = uuid.New()
	r2.request(id, "bytecode", "traversal", bytecodeArg(gb.Instruction{Op: "V"}))
	r2.read()
	r2.request(uuid.New(), "authentication", "traversal", gb.MapEntry{Key: "sasl", Value: "AHJlYWRlcgB3cm9uZw=="})
	if resp := r2.read(); resp.code != 401 || resp.id != id {
		t.Fatalf("bad auth: %+v", resp)
	}
}
