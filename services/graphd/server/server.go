// Package server is graphd: an embedded, Gremlin-Server-compatible graph
// database that speaks the Gremlin Server WebSocket protocol with GraphBinary
// v1 (as used by gremlin-go v3.7 and v3.8), interprets traversal bytecode over
// an in-memory property graph (package traversal), and persists every
// acknowledged mutation in a write-ahead log with snapshot compaction
// (package store) so that it survives kill -9.
//
// Protocol summary: WebSocket endpoint /gremlin; ops "bytecode" (processor
// "traversal"), "authentication" (SASL PLAIN, answered under the id of the
// request that was challenged with 407) and "eval" (refused: scripts are not
// supported); results in batches of batchSize as 206 partial responses
// followed by 200, or 204 when empty.
package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/panjf2000/ants/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
	"github.com/worldgate/worldgate/services/graphd/store"
	"github.com/worldgate/worldgate/services/graphd/traversal"
	"github.com/worldgate/worldgate/shared/metrics"
)

// User is a credential. ReadOnly users may not run mutating traversals.
type User struct {
	Name, Password string
	ReadOnly       bool
}

// Config configures a Server.
type Config struct {
	Listen           string        // "127.0.0.1:8182"; ":0" allowed
	DataDir          string        // required for durability; "" = in-memory only
	Users            []User        // empty = no authentication
	BatchSize        int           // default 64
	MaxFrameBytes    int64         // default 16 MiB
	TraversalTimeout time.Duration // default 30s
	MaxResults       int           // default 1,000,000
	Logger           *slog.Logger
	// CompactBytes is the WAL size that triggers snapshot compaction (default 64 MiB).
	CompactBytes int64
	// Sources are traversal sources served besides g, each its own graph
	// (a client picks one with the request's aliases, {g: name}, e.g.
	// gremlin-go's DriverRemoteConnectionSettings.TraversalSource). With a
	// DataDir, source NAME keeps its graph in DataDir/sources/NAME; g stays
	// in DataDir itself.
	Sources []string
	// SessionTimeout is how long an idle session keeps its open
	// transaction (default DefaultSessionTimeout).
	SessionTimeout time.Duration
	// IODir is the directory io(path).read() reads graph files from
	// (GraphSON 3, GraphML); a path is resolved inside it only (no absolute
	// paths, no '..', no symbolic link leading out). "": io() is refused.
	IODir string
	// IOMaxBytes bounds one file io() reads (default DefaultIOMaxBytes).
	IOMaxBytes int64
	// Registerer receives graphd's metrics and Gatherer is what /metrics serves; nil: a
	// registry of graphd's own (with the Go and process collectors).
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Pprof serves Go's runtime profiles under /debug/pprof/ on the listen address, for
	// diagnosis (graphd -pprof); never where clients other than the operator's reach it.
	Pprof bool
}

// Defaults.
const (
	DefaultBatchSize        = 64
	DefaultMaxFrameBytes    = 16 << 20
	DefaultTraversalTimeout = 30 * time.Second
	DefaultMaxResults       = 1_000_000
	maxInFlightPerConn      = 64
	DefaultIOMaxBytes       = 256 << 20
)

// Server is a graphd instance.
type Server struct {
	cfg   Config
	log   *slog.Logger
	store *store.Store
	// sources are the stores of the traversal sources, g included.
	sources map[string]*store.Store
	users   map[string]User
	metrics *serverMetrics
	gather  prometheus.Gatherer

	mu       sync.Mutex
	ln       net.Listener
	http     *http.Server
	url      string
	conns    map[*conn]struct{}
	sessions map[string]*session
	// endedSessions: sessions that timed out or lost their connection, and why.
	endedSessions map[string]string
	closing       bool
	closed        bool
	inflight      sync.WaitGroup
	connWG        sync.WaitGroup
	// pool runs requests on reused goroutines: a goroutine started per request grew its stack,
	// by copying, on every request (perf: 1.35 % of a move's CPU in graphd's morestack).
	pool *ants.Pool
	// ioRoot is Config.IODir, opened (nil without one).
	ioRoot *os.Root
}

// poolIdle is how long a pooled request goroutine waits for its next request before it exits.
const poolIdle = time.Minute

// New validates the configuration and opens the data directory (recovering
// its contents). It does not listen yet.
func New(cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:8182"
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.TraversalTimeout <= 0 {
		cfg.TraversalTimeout = DefaultTraversalTimeout
	}
	if cfg.MaxResults <= 0 {
		cfg.MaxResults = DefaultMaxResults
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	users := map[string]User{}
	for _, u := range cfg.Users {
		if u.Name == "" {
			return nil, errors.New("graphd: user with empty name")
		}
		users[u.Name] = u
	}
	if cfg.Registerer == nil {
		reg := metrics.NewRegistry()
		cfg.Registerer, cfg.Gatherer = reg, reg
	}
	if cfg.IOMaxBytes <= 0 {
		cfg.IOMaxBytes = DefaultIOMaxBytes
	}
	s := &Server{cfg: cfg, log: cfg.Logger, users: users, conns: map[*conn]struct{}{}, gather: cfg.Gatherer}
	if cfg.IODir != "" {
		root, err := os.OpenRoot(cfg.IODir)
		if err != nil {
			return nil, fmt.Errorf("graphd: io directory: %w", err)
		}
		s.ioRoot = root
	}
	m, err := newServerMetrics(cfg.Registerer, func() map[string]*store.Store { return s.sources })
	if err != nil {
		return nil, fmt.Errorf("graphd: metrics: %w", err)
	}
	s.metrics = m
	st, err := store.Open(cfg.DataDir, store.Options{Logger: cfg.Logger, CompactBytes: cfg.CompactBytes, OnCompact: s.metrics.compacted("g"), OnSync: s.metrics.synced("g")})
	if err != nil {
		return nil, fmt.Errorf("graphd: open data directory: %w", err)
	}
	sources := map[string]*store.Store{"g": st}
	closeAll := func() {
		for _, s := range sources {
			_ = s.Close()
		}
	}
	for _, name := range cfg.Sources {
		if !validSourceName(name) {
			closeAll()
			return nil, fmt.Errorf("graphd: traversal source name %q: use letters, digits and _ (starting with a letter)", name)
		}
		if _, dup := sources[name]; dup {
			closeAll()
			return nil, fmt.Errorf("graphd: traversal source %q given twice", name)
		}
		dir := ""
		if cfg.DataDir != "" {
			dir = filepath.Join(cfg.DataDir, "sources", name)
		}
		ss, err := store.Open(dir, store.Options{Logger: cfg.Logger.With("source", name), CompactBytes: cfg.CompactBytes, OnCompact: s.metrics.compacted(name), OnSync: s.metrics.synced(name)})
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("graphd: open data directory of traversal source %s: %w", name, err)
		}
		sources[name] = ss
	}
	pool, err := ants.NewPool(-1, ants.WithExpiryDuration(poolIdle), ants.WithLogger(discard{}))
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("graphd: request pool: %w", err)
	}
	s.store, s.sources, s.pool = st, sources, pool
	return s, nil
}

// Start listens and serves in the background; it returns once the listener
// is bound.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.closing {
		return errors.New("graphd: server closed")
	}
	if s.ln != nil {
		return errors.New("graphd: already started")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("graphd: listen %s: %w", s.cfg.Listen, err)
	}
	s.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("/gremlin", s.handleWS)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	if s.gather != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(s.gather, promhttp.HandlerOpts{}))
	}
	if s.cfg.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	}
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	host := ln.Addr().String()
	s.url = "ws://" + host + "/gremlin"
	go func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("graphd: serve", "err", err)
		}
	}()
	s.log.Info("graphd: listening", "url", s.url, "dataDir", s.cfg.DataDir, "auth", len(s.users) > 0)
	return nil
}

// URL is ws://host:port/gremlin (empty before Start).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Addr is the bound host:port (empty before Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops accepting connections, lets in-flight requests finish (until
// ctx is done), closes connections and flushes the store.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	h := s.http
	s.mu.Unlock()
	var errs []error
	if h != nil {
		if err := h.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("graphd: in-flight requests did not finish: %w", ctx.Err()))
	}
	s.mu.Lock()
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	cdone := make(chan struct{})
	go func() { s.connWG.Wait(); close(cdone) }()
	select {
	case <-cdone:
	case <-ctx.Done():
	}
	for _, name := range s.sourceNames() {
		if err := s.sources[name].Close(); err != nil {
			errs = append(errs, fmt.Errorf("traversal source %s: %w", name, err))
		}
	}
	s.pool.Release()
	if s.ioRoot != nil {
		_ = s.ioRoot.Close()
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.log.Info("graphd: closed")
	return errors.Join(errs...)
}

// discard is ants' logger, silenced: handleFrame recovers panics itself.
type discard struct{}

func (discard) Printf(string, ...any) {}

var upgrader = websocket.Upgrader{
	ReadBufferSize:  64 << 10,
	WriteBufferSize: 64 << 10,
	CheckOrigin:     func(*http.Request) bool { return true },
}

type conn struct {
	s     *Server
	ws    *websocket.Conn
	wmu   sync.Mutex
	amu   sync.Mutex
	user  *User
	queue []*gb.Request // requests waiting for SASL authentication
	once  sync.Once
	sem   chan struct{}
}

func (c *conn) close() {
	c.once.Do(func() {
		c.wmu.Lock()
		_ = c.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseGoingAway, "graphd shutting down"), time.Now().Add(time.Second))
		c.wmu.Unlock()
		_ = c.ws.Close()
	})
}

func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &conn{s: s, ws: ws, sem: make(chan struct{}, maxInFlightPerConn)}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = ws.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.dropConnSessions(c)
		c.close()
		s.connWG.Done()
	}()
	c.readLoop()
}

func (c *conn) readLoop() {
	max := c.s.cfg.MaxFrameBytes
	for {
		mt, rd, err := c.ws.NextReader()
		if err != nil {
			return
		}
		if mt != websocket.BinaryMessage {
			if mt == websocket.TextMessage {
				_, _ = io.Copy(io.Discard, rd)
				c.sendError(uuid.Nil, gb.StatusMalformedRequest, "graphd accepts binary GraphBinary frames only")
			}
			continue
		}
		buf := getFrameBuf()
		if _, err := buf.ReadFrom(io.LimitReader(rd, max+1)); err != nil {
			putFrameBuf(buf)
			return
		}
		frame := buf.Bytes()
		if int64(len(frame)) > max {
			_, _ = io.Copy(io.Discard, rd)
			id := headerID(frame)
			putFrameBuf(buf)
			c.sendError(id, gb.StatusMalformedRequest, fmt.Sprintf("request frame exceeds the %d byte limit", max))
			continue
		}
		c.s.mu.Lock()
		closing := c.s.closing
		if !closing {
			c.s.inflight.Add(1)
		}
		c.s.mu.Unlock()
		if closing {
			id := headerID(frame)
			putFrameBuf(buf)
			c.sendError(id, gb.StatusServerError, "graphd is shutting down")
			continue
		}
		c.sem <- struct{}{}
		handle := func() {
			defer func() { <-c.sem; c.s.inflight.Done() }()
			defer putFrameBuf(buf) // handleFrame is done with the frame: the decoded request holds no reference to it
			c.handleFrame(frame)
		}
		if err := c.s.pool.Submit(handle); err != nil { // released: closing
			go handle()
		}
	}
}

// frameBufs recycles the buffers request frames are read into. A frame's bytes are free
// again once handleFrame returns: gb.ReadRequest copies whatever the request keeps
// (strings, byte buffers, ids), so nothing refers to them after decoding.
var frameBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledFrame: a buffer that grew larger than this (a rare, large request) is left to
// the garbage collector rather than kept in the pool.
const maxPooledFrame = 1 << 20

func getFrameBuf() *bytes.Buffer {
	b := frameBufs.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putFrameBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledFrame {
		frameBufs.Put(b)
	}
}

// headerID extracts the request id from a (possibly truncated) frame.
func headerID(frame []byte) uuid.UUID {
	if len(frame) < 1 {
		return uuid.Nil
	}
	off := 1 + int(frame[0]) + 1
	if len(frame) < off+16 {
		return uuid.Nil
	}
	var id uuid.UUID
	copy(id[:], frame[off:off+16])
	return id
}

func (c *conn) handleFrame(frame []byte) {
	var req *gb.Request
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("graphd: panic while handling request", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			id := uuid.Nil
			if req != nil {
				id = req.ID
			}
			c.sendError(id, gb.StatusServerError, fmt.Sprintf("internal server error: %v", p))
		}
	}()
	req, err := gb.ReadRequest(frame)
	if err != nil {
		var idErr *gb.RequestIDError
		id := req.ID
		if errors.As(err, &idErr) {
			id = headerID(frame)
		}
		code := int32(gb.StatusRequestSerializing)
		var ut *gb.UnknownTypeError
		if errors.As(err, &ut) {
			code = gb.StatusRequestSerializing
		} else if idErr != nil {
			code = gb.StatusMalformedRequest
		}
		c.s.log.Warn("graphd: malformed request", "err", err, "requestId", id)
		c.s.metrics.request("invalid", code, 0)
		c.sendError(id, code, "malformed request: "+err.Error())
		return
	}
	c.dispatch(req)
}

func (c *conn) dispatch(req *gb.Request) {
	if req.Op == "authentication" {
		c.authenticate(req)
		return
	}
	if len(c.s.users) > 0 {
		c.amu.Lock()
		if c.user == nil {
			c.queue = append(c.queue, req)
			c.amu.Unlock()
			c.send(&gb.Response{RequestID: req.ID, Code: gb.StatusAuthenticate,
				HasMessage: true, Message: "authentication required"})
			return
		}
		c.amu.Unlock()
	}
	c.process(req)
}

func (c *conn) authenticate(auth *gb.Request) {
	c.amu.Lock()
	var orig *gb.Request
	if len(c.queue) > 0 {
		orig, c.queue = c.queue[0], c.queue[1:]
	}
	c.amu.Unlock()
	replyID := auth.ID
	if orig != nil {
		replyID = orig.ID
	}
	user, err := c.s.checkSASL(auth)
	if err != nil {
		c.s.log.Warn("graphd: authentication failed", "err", err, "remote", c.ws.RemoteAddr().String())
		c.s.metrics.request("authentication", gb.StatusUnauthorized, 0)
		c.send(&gb.Response{RequestID: replyID, Code: gb.StatusUnauthorized, HasMessage: true,
			Message: "Username and/or password are incorrect"})
		return
	}
	c.amu.Lock()
	c.user = user
	c.amu.Unlock()
	c.s.metrics.request("authentication", gb.StatusSuccess, 0)
	if orig == nil {
		c.send(&gb.Response{RequestID: replyID, Code: gb.StatusNoContent})
		return
	}
	c.process(orig)
}

func (s *Server) checkSASL(auth *gb.Request) (*User, error) {
	if len(s.users) == 0 {
		return &User{}, nil
	}
	if mech, ok := auth.Arg("saslMechanism"); ok && mech != "PLAIN" {
		return nil, fmt.Errorf("unsupported SASL mechanism %v", mech)
	}
	v, _ := auth.Arg("sasl")
	var raw []byte
	switch x := v.(type) {
	case string:
		b, err := base64.StdEncoding.DecodeString(x)
		if err != nil {
			return nil, errors.New("sasl argument is not base64")
		}
		raw = b
	case []byte:
		raw = x
	default:
		return nil, errors.New("missing sasl argument")
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 3 {
		return nil, errors.New("malformed SASL PLAIN response")
	}
	u, ok := s.users[parts[1]]
	if !ok || !constantTimeEq(u.Password, parts[2]) {
		return nil, fmt.Errorf("bad credentials for user %q", parts[1])
	}
	return &u, nil
}

func constantTimeEq(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return v == 0
}

func argInt(req *gb.Request, name string) (int64, bool) {
	v, ok := req.Arg(name)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int16:
		return int64(n), true
	}
	return 0, false
}

func (c *conn) process(req *gb.Request) {
	start := time.Now()
	op, code := c.serve(req)
	c.s.metrics.request(op, code, time.Since(start))
}

// serve answers one request; it returns the request's op as the metrics name it (read, write,
// eval, close, invalid) and the status code of the answer.
func (c *conn) serve(req *gb.Request) (string, int32) {
	fail := func(op string, code int32, msg string) (string, int32) {
		c.sendError(req.ID, code, msg)
		return op, code
	}
	switch req.Op {
	case "bytecode":
	case "eval":
		return fail("eval", gb.StatusInvalidArguments, "graphd does not evaluate Gremlin scripts (op eval): scripts are not supported; submit bytecode traversals")
	case "close":
		if req.Processor == "session" {
			if id, ok := sessionID(req); ok {
				c.s.mu.Lock()
				ss := c.s.sessions[id]
				c.s.mu.Unlock()
				if ss != nil {
					c.s.endSession(ss, "closed by the client")
				}
			}
		}
		c.send(&gb.Response{RequestID: req.ID, Code: gb.StatusNoContent})
		return "close", gb.StatusNoContent
	default:
		return fail("invalid", gb.StatusInvalidArguments, fmt.Sprintf("unknown op %q (graphd supports bytecode and authentication)", req.Op))
	}
	var sessID string
	switch req.Processor {
	case "traversal", "":
	case "session":
		id, ok := sessionID(req)
		if !ok {
			return fail("invalid", gb.StatusInvalidArguments, "a request with processor session needs a session argument (the session id)")
		}
		sessID = id
	default:
		return fail("invalid", gb.StatusInvalidArguments, fmt.Sprintf("processor %q is not supported (graphd serves traversal and session)", req.Processor))
	}
	g, _ := req.Arg("gremlin")
	bc, ok := g.(*gb.Bytecode)
	if !ok {
		return fail("invalid", gb.StatusInvalidArguments, "bytecode op requires a gremlin argument of type Bytecode")
	}
	op := "read"
	if traversal.Mutating(bc) {
		op = "write"
	}
	st := c.s.store
	if al, ok := req.Arg("aliases"); ok {
		m, ok := al.(*gb.Map)
		if !ok {
			return fail(op, gb.StatusInvalidArguments, "aliases must be a map")
		}
		if src, ok := m.Get("g"); ok {
			name, _ := src.(string)
			if st = c.s.sources[name]; st == nil {
				return fail(op, gb.StatusInvalidArguments, fmt.Sprintf("the traversal source [%v] for alias [g] is not configured on the server (graphd serves %s)", src, strings.Join(c.s.sourceNames(), ", ")))
			}
		}
	}
	batch := c.s.cfg.BatchSize
	if n, ok := argInt(req, "batchSize"); ok && n > 0 && n < 1<<20 {
		batch = int(n)
	}
	timeout := c.s.cfg.TraversalTimeout
	if n, ok := argInt(req, "evaluationTimeout"); ok && n > 0 {
		if d := time.Duration(n) * time.Millisecond; d < timeout {
			timeout = d
		}
	}
	includeProps := true
	if mp, ok := req.Arg("materializeProperties"); ok && mp == "tokens" {
		includeProps = false
	}

	start := time.Now()
	var results results
	var err error
	if txop, isTx := txOp(bc); isTx {
		op = "write" // a commit is a write (with its WAL fsync); a rollback is counted with them
		if sessID == "" {
			return fail(op, gb.StatusInvalidArguments, fmt.Sprintf("g.tx().%s() needs a session: open a transaction with g.tx() (gremlin-go: g.Tx().Begin()) and commit or roll back through it", txop))
		}
		ss, serr := c.s.sessionFor(c, sessID, st, userName(c.currentUser()))
		if serr == nil {
			serr = c.s.finishTx(ss, txop, timeout)
		}
		err = serr
	} else if sessID != "" {
		ss, serr := c.s.sessionFor(c, sessID, st, userName(c.currentUser()))
		if serr == nil {
			results, serr = c.s.executeInSession(ss, bc, c.currentUser(), timeout, includeProps)
		}
		err = serr
	} else {
		results, err = c.s.execute(st, bc, c.currentUser(), timeout, includeProps)
	}
	if err != nil {
		code := gb.StatusServerError
		var te *traversal.Error
		var ae *accessError
		switch {
		case errors.As(err, &te):
			code = te.Code
		case errors.As(err, &ae):
			code = ae.code
		}
		c.s.log.Debug("graphd: traversal failed", "requestId", req.ID, "code", code, "err", err)
		return fail(op, int32(code), err.Error())
	}
	c.s.log.Debug("graphd: traversal", "requestId", req.ID, "results", len(results.vals), "elapsed", time.Since(start))
	return op, c.sendResults(req.ID, results, batch)
}

func (c *conn) currentUser() *User {
	c.amu.Lock()
	defer c.amu.Unlock()
	return c.user
}

type accessError struct {
	code int
	msg  string
}

func (e *accessError) Error() string { return e.msg }

// results are a traversal's values with their traverser bulks.
type results struct {
	vals  []any
	bulks []int64
}

// compile compiles a traversal and checks that user may run it.
func (s *Server) compile(bc *gb.Bytecode, user *User) (*traversal.Traversal, bool, error) {
	t, err := traversal.Compile(bc)
	if err != nil {
		return nil, false, err
	}
	mutating := traversal.Mutating(bc)
	if mutating && t.ReadOnlyStrategy {
		return nil, false, traversal.ErrReadOnly
	}
	if mutating && user != nil && user.ReadOnly {
		return nil, false, &accessError{code: gb.StatusForbidden, msg: fmt.Sprintf("user %q is read-only and may not run mutating traversals", user.Name)}
	}
	return t, mutating, nil
}

func userName(u *User) string {
	if u == nil {
		return ""
	}
	return u.Name
}

// sessionID is a session request's session argument.
func sessionID(req *gb.Request) (string, bool) {
	v, ok := req.Arg("session")
	if !ok {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, x != ""
	case uuid.UUID:
		return x.String(), true
	}
	return "", false
}

// limits are one execution's bounds, with io()'s directory.
func (s *Server) limits() traversal.Limits {
	lim := traversal.Limits{MaxResults: s.cfg.MaxResults, MaxFileBytes: s.cfg.IOMaxBytes}
	if s.ioRoot != nil {
		lim.Files = s.ioRoot
	}
	return lim
}

// execute compiles and runs one traversal atomically.
func (s *Server) execute(st *store.Store, bc *gb.Bytecode, user *User, timeout time.Duration, includeProps bool) (results, error) {
	t, mutating, err := s.compile(bc, user)
	if err != nil {
		return results{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	lim := s.limits()
	var res results
	if !mutating {
		err = st.Read(func(g *graph.Graph) error {
			var err error
			res.vals, res.bulks, err = t.ExecuteBulk(ctx, g, nil, lim, includeProps)
			return err
		})
	} else {
		err = st.Write(ctx, func(g *graph.Graph, tx *graph.Tx) error {
			var err error
			res.vals, res.bulks, err = t.ExecuteBulk(ctx, g, tx, lim, includeProps)
			return err
		})
	}
	if err != nil {
		return results{}, err
	}
	return res, nil
}

func (c *conn) sendResults(id uuid.UUID, res results, batch int) int32 {
	results := res.vals
	if len(results) == 0 {
		c.send(&gb.Response{RequestID: id, Code: gb.StatusNoContent, Attributes: &gb.Map{}, Meta: &gb.Map{}})
		return gb.StatusNoContent
	}
	for off := 0; off < len(results); off += batch {
		end := min(off+batch, len(results))
		items := make([]any, 0, end-off)
		for i, r := range results[off:end] {
			items = append(items, &gb.Traverser{Bulk: res.bulks[off+i], Value: r})
		}
		code := int32(gb.StatusPartialContent)
		if end == len(results) {
			code = gb.StatusSuccess
		}
		buf, err := gb.WriteResponse(&gb.Response{RequestID: id, Code: code, Attributes: &gb.Map{}, Meta: &gb.Map{}, Data: items}, nil)
		if err != nil {
			c.sendError(id, gb.StatusSerialization, "could not serialize result: "+err.Error())
			return gb.StatusSerialization
		}
		if !c.write(buf) {
			return statusClientGone
		}
	}
	return gb.StatusSuccess
}

func (c *conn) sendError(id uuid.UUID, code int32, msg string) {
	c.send(&gb.Response{RequestID: id, Code: code, HasMessage: true, Message: msg,
		Attributes: &gb.Map{Entries: []gb.MapEntry{{Key: "exceptions", Value: []any{"graphd"}}}}})
}

func (c *conn) send(resp *gb.Response) {
	buf, err := gb.WriteResponse(resp, nil)
	if err != nil {
		c.s.log.Error("graphd: cannot serialize response", "err", err)
		return
	}
	c.write(buf)
}

func (c *conn) write(buf []byte) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := c.ws.WriteMessage(websocket.BinaryMessage, buf); err != nil {
		c.s.log.Debug("graphd: write failed", "err", err)
		return false
	}
	return true
}

// sourceNames lists the traversal sources, g first.
func (s *Server) sourceNames() []string {
	return append([]string{"g"}, s.cfg.Sources...)
}

func validSourceName(n string) bool {
	if n == "" || n == "g" || len(n) > 64 {
		return false
	}
	for i, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '_'):
		default:
			return false
		}
	}
	return true
}
