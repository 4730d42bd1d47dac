// Package edge is Worldgate's HTTP front for publishers and clients that do not speak NATS:
// POST /v1/events publishes world events (one envelope, or NDJSON for a batch) after the same
// strict decoding as everywhere; GET /v1/outcomes streams outcomes as Server-Sent Events
// (filters, Last-Event-ID resume); GET /v1/events/{id}/outcome long-polls one event's outcome;
// GET /v1/events/{id}/journey tells every attempt made for it (the refused ones too) and what
// the whole request cost.
// Clients authenticate with API keys that carry scopes (publish; read outcomes of all players
// or only named ones) and a rate limit each. The OpenAPI 3.1 document is at /openapi.json.
//
// Routing is net/http's ServeMux (method and path patterns), SSE framing github.com/tmaxmax/go-sse,
// rate limiting golang.org/x/time/rate, CORS github.com/rs/cors.
package edge

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/cors"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/metrics"
)

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document edge serves at /openapi.json.
func OpenAPI() []byte { return bytes.Clone(openAPI) }

// Config configures a Server.
type Config struct {
	JetStream jetstream.JetStream
	Keys      *Keyring
	// CORSOrigins are the browser origins allowed to call the API (empty: none). "*" is
	// refused: every answer of the API is authenticated.
	CORSOrigins []string
	// MaxBatch is the most envelopes one NDJSON request may carry (default 500); one line may
	// be events.DefaultMaxBytes.
	MaxBatch int
	// SSEBuffer is how many outcomes may wait for a slow SSE client before it is dropped
	// (default 256); WriteTimeout how long one write to it may take (default 10s).
	SSEBuffer    int
	WriteTimeout time.Duration
	// Heartbeat is the interval of SSE comments that keep idle connections open (default 15s).
	Heartbeat time.Duration
	// LongPollMax bounds GET /v1/events/{id}/outcome's wait (default 60s; default wait 25s).
	LongPollMax time.Duration
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
	// Extra routes served beside the API without a key and without CORS (the /play console);
	// they must not overlap /v1/ or /openapi.json.
	Extra map[string]http.Handler
}

// Server serves the API.
type Server struct {
	cfg     Config
	handler http.Handler
	m       *edgeMetrics
	// stopping is closed when Shutdown begins: open SSE streams end so the HTTP server can drain.
	stopping chan struct{}
}

type edgeMetrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	published prometheus.Counter
	streams   prometheus.Gauge
	dropped   prometheus.Counter
	refused   *prometheus.CounterVec
}

// New builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.JetStream == nil || cfg.Keys == nil {
		return nil, errors.New("edge: JetStream and Keys are required")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 500
	}
	if cfg.SSEBuffer <= 0 {
		cfg.SSEBuffer = 256
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.LongPollMax <= 0 {
		cfg.LongPollMax = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	s := &Server{cfg: cfg, stopping: make(chan struct{})}
	const ns = "worldgate"
	s.m = &edgeMetrics{
		requests: metrics.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "edge_requests_total",
			Help: "HTTP requests to edge by route and status code."}, []string{"route", "code"})),
		latency: metrics.Register(cfg.Registerer, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "edge_request_seconds",
			Help: "Time edge took to answer (for SSE, until the stream started).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}, []string{"route"})),
		published: metrics.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "edge_events_published_total",
			Help: "World events edge published and JetStream acknowledged."})),
		streams: metrics.Register(cfg.Registerer, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "edge_sse_streams",
			Help: "Open SSE streams of outcomes."})),
		dropped: metrics.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "edge_sse_dropped_total",
			Help: "SSE clients dropped because they read too slowly (they resume with Last-Event-ID)."})),
		refused: metrics.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "edge_outcomes_dropped_total",
			Help: "Outcomes edge did not deliver to a client (SSE or long poll), once per reader: misrouted (the body does not match the subject it was published on: a forgery) or undecodable."},
			[]string{"reason"})),
	}
	for _, r := range []string{dropMisrouted, dropUndecodable} {
		s.m.refused.WithLabelValues(r)
	}
	for _, o := range cfg.CORSOrigins {
		if o == "*" || strings.TrimSpace(o) == "" {
			return nil, fmt.Errorf("edge: CORS origin %q is refused: the API's answers are authenticated, so name each origin of your game's pages (e.g. https://game.example)", o)
		}
	}
	notFound := func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, "not_found", "no such resource: see /openapi.json", fieldError{Field: "path", Message: r.URL.Path + " is not a route of this API"})
	}
	api := http.NewServeMux()
	api.Handle("POST /v1/events", s.api("publish", ScopePublish, s.publish))
	api.Handle("GET /v1/outcomes", s.api("outcomes", "read", s.outcomes))
	api.Handle("GET /v1/events/{id}/outcome", s.api("outcome", "read", s.outcome))
	api.Handle("GET /v1/events/{id}/journey", s.api("journey", "read", s.journey))
	api.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPI)
	})
	api.HandleFunc("/", notFound)
	// CORS only for the origins named, each echoed (never "*"), and only on the API: with no
	// origin named, no answer carries a CORS header (rs/cors would allow every origin). The
	// extra routes (the console) are same-origin only and get none.
	var apiHandler http.Handler = api
	if len(cfg.CORSOrigins) > 0 {
		apiHandler = cors.New(cors.Options{
			AllowedOrigins: cfg.CORSOrigins,
			AllowedMethods: []string{http.MethodGet, http.MethodPost},
			AllowedHeaders: []string{"Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"},
			ExposedHeaders: []string{"Retry-After", "Location"},
			MaxAge:         600,
		}).Handler(api)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", apiHandler)
	mux.Handle("/openapi.json", apiHandler)
	for pattern, h := range cfg.Extra {
		mux.Handle(pattern, h)
	}
	mux.HandleFunc("/", notFound)
	s.handler = mux
	return s, nil
}

// Handler is the HTTP handler of the API (and the extra routes).
func (s *Server) Handler() http.Handler { return s.handler }

// Shutdown ends open SSE streams (clients resume with Last-Event-ID) so that the HTTP
// server's own Shutdown can drain the rest.
func (s *Server) Shutdown() {
	select {
	case <-s.stopping:
	default:
		close(s.stopping)
	}
}

// statusWriter records the status code for metrics.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// api authenticates the request's key, checks its scope ("read" means any read scope) and
// rate, and records metrics.
func (s *Server) api(route, scope string, h func(w http.ResponseWriter, r *http.Request, k *key)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			s.m.requests.WithLabelValues(route, strconv.Itoa(max(sw.code, 200))).Inc()
		}()
		secret, ok := bearer(r)
		if !ok {
			sw.Header().Set("WWW-Authenticate", `Bearer realm="worldgate"`)
			writeProblem(sw, http.StatusUnauthorized, "missing_key", "an API key is required",
				fieldError{Field: "Authorization", Message: "send the header Authorization: Bearer <API key>"})
			return
		}
		k := s.cfg.Keys.find(secret)
		if k == nil {
			sw.Header().Set("WWW-Authenticate", `Bearer realm="worldgate", error="invalid_token"`)
			writeProblem(sw, http.StatusUnauthorized, "unknown_key", "the API key is not known",
				fieldError{Field: "Authorization", Message: "no key matches this secret"})
			return
		}
		if scope == ScopePublish && !k.may(ScopePublish) || scope == "read" && !k.mayRead() {
			want := scope
			if scope == "read" {
				want = "read:all or read:<actor id>"
			}
			writeProblem(sw, http.StatusForbidden, "scope", fmt.Sprintf("key %q lacks the scope %s", k.Name, want),
				fieldError{Field: "Authorization", Message: "this key may not " + route})
			return
		}
		if res := k.limiter.Reserve(); !res.OK() || res.Delay() > 0 {
			delay := time.Second
			if res.OK() {
				delay = res.Delay()
				res.Cancel()
			}
			sw.Header().Set("Retry-After", strconv.Itoa(int(delay.Seconds())+1))
			writeProblem(sw, http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("key %q is over its rate of %g requests/s", k.Name, k.Rate),
				fieldError{Field: "Authorization", Message: "slow down; retry after the Retry-After seconds"})
			return
		}
		h(sw, r, k)
		if route != "outcomes" {
			s.m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}
	})
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// fieldError names what is wrong and where: a header, a query parameter, a JSON Pointer into
// the body (with the line of an NDJSON batch).
type fieldError struct {
	Field   string `json:"field"`
	Line    int    `json:"line,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// problem is an RFC 9457 problem document.
type problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Errors []fieldError `json:"errors,omitempty"`
}

func writeProblem(w http.ResponseWriter, status int, code, title string, errs ...fieldError) {
	p := problem{Type: "https://worldgate.dev/problems/" + code, Title: title, Status: status, Errors: errs}
	if len(errs) > 0 {
		parts := make([]string, 0, len(errs))
		for _, e := range errs {
			where := e.Field
			if e.Line > 0 {
				where = fmt.Sprintf("line %d %s", e.Line, e.Field)
			}
			parts = append(parts, where+": "+e.Message)
		}
		p.Detail = strings.Join(parts, "; ")
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Accepted is one published event in POST /v1/events's answer.
type Accepted struct {
	EventID   string `json:"eventId"`
	Sequence  uint64 `json:"sequence"`
	Duplicate bool   `json:"duplicate"`
}

type publishResponse struct {
	EventID  string     `json:"eventId,omitempty"`
	Accepted []Accepted `json:"accepted"`
}

const (
	ctJSON   = "application/json"
	ctNDJSON = "application/x-ndjson"
)

type line struct {
	n   int
	raw []byte
	env *events.Envelope
}

func (s *Server) publish(w http.ResponseWriter, r *http.Request, k *key) {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != ctJSON && ct != ctNDJSON {
		writeProblem(w, http.StatusUnsupportedMediaType, "content_type", "unsupported content type",
			fieldError{Field: "Content-Type", Message: fmt.Sprintf("%q: send %s (one envelope) or %s (one envelope per line)", r.Header.Get("Content-Type"), ctJSON, ctNDJSON)})
		return
	}
	idem := r.Header.Get("Idempotency-Key")
	if idem != "" && (len(idem) > 128 || strings.ContainsAny(idem, " \t\r\n")) {
		writeProblem(w, http.StatusBadRequest, "idempotency_key", "invalid Idempotency-Key",
			fieldError{Field: "Idempotency-Key", Message: "1 to 128 characters without whitespace"})
		return
	}
	limit := int64(events.DefaultMaxBytes)
	if ct == ctNDJSON {
		limit = int64(s.cfg.MaxBatch) * (events.DefaultMaxBytes + 1)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeProblem(w, http.StatusRequestEntityTooLarge, "too_large", "request body too large",
			fieldError{Field: "body", Code: string(events.ProblemTooLarge), Message: fmt.Sprintf("over the %d-byte limit", limit)})
		return
	case err != nil:
		writeProblem(w, http.StatusBadRequest, "body", "the request body could not be read", fieldError{Field: "body", Message: err.Error()})
		return
	}
	var lines []line
	if ct == ctJSON {
		lines = []line{{n: 0, raw: bytes.TrimSpace(body)}}
	} else {
		for i, l := range bytes.Split(body, []byte("\n")) {
			if l = bytes.TrimSpace(l); len(l) > 0 {
				lines = append(lines, line{n: i + 1, raw: l})
			}
		}
		if len(lines) > s.cfg.MaxBatch {
			writeProblem(w, http.StatusRequestEntityTooLarge, "too_many", "too many envelopes in one batch",
				fieldError{Field: "body", Message: fmt.Sprintf("%d envelopes, at most %d per request", len(lines), s.cfg.MaxBatch)})
			return
		}
	}
	if len(lines) == 0 || len(lines[0].raw) == 0 {
		writeProblem(w, http.StatusBadRequest, "empty", "the request carries no envelope",
			fieldError{Field: "body", Code: string(events.ProblemMalformed), Message: "send one envelope (JSON) or one per line (NDJSON)"})
		return
	}
	// Decode everything first: a batch with one bad line publishes nothing.
	var errs []fieldError
	for i := range lines {
		env, err := events.DecodeEnvelope(lines[i].raw)
		var inv *events.InvalidError
		if errors.As(err, &inv) {
			for _, p := range inv.Problems {
				field := p.Path
				if field == "" {
					field = "body"
				}
				errs = append(errs, fieldError{Field: field, Line: lines[i].n, Code: string(p.Code), Message: p.Message})
			}
			continue
		}
		if err != nil {
			errs = append(errs, fieldError{Field: "body", Line: lines[i].n, Message: err.Error()})
			continue
		}
		lines[i].env = env
	}
	if len(errs) > 0 {
		status := http.StatusBadRequest
		if errs[0].Code == string(events.ProblemTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		writeProblem(w, status, "invalid_envelope", "invalid envelope: nothing was published", errs...)
		return
	}
	// The envelope's idempotencyKey is the JetStream message id (Worldgate's workers refuse an
	// event whose Nats-Msg-Id differs from it). The header, when sent, must name the same key:
	// a retry is recognised by the key the envelope carries, whatever the header says.
	if idem != "" {
		if ct == ctNDJSON {
			writeProblem(w, http.StatusBadRequest, "idempotency_key", "Idempotency-Key does not apply to a batch",
				fieldError{Field: "Idempotency-Key", Message: "each envelope of a batch carries its own idempotencyKey; omit the header"})
			return
		}
		if idem != lines[0].env.IdempotencyKey {
			writeProblem(w, http.StatusBadRequest, "idempotency_key", "Idempotency-Key differs from the envelope's idempotencyKey",
				fieldError{Field: "Idempotency-Key", Message: fmt.Sprintf("header %q, envelope %q: send the same key (or omit the header)", idem, lines[0].env.IdempotencyKey)})
			return
		}
	}
	for _, l := range lines {
		if why := k.mayPublish(l.env); why != "" {
			writeProblem(w, http.StatusForbidden, "scope", why+": nothing was published",
				fieldError{Field: "/actor/id", Line: l.n, Message: why + "; publish only for the players this key names"})
			return
		}
	}
	var out publishResponse
	for i, l := range lines {
		ack, err := events.PublishRaw(r.Context(), s.cfg.JetStream, l.env.Type, l.env.IdempotencyKey, l.env.CorrelationID, l.raw)
		if err != nil {
			s.cfg.Logger.Error("publish failed", "eventId", l.env.EventID, "err", err)
			writeProblem(w, http.StatusServiceUnavailable, "unavailable", "JetStream did not acknowledge the event; retry with the same Idempotency-Key",
				fieldError{Field: "body", Line: l.n, Message: fmt.Sprintf("%d of %d envelopes were published before this one failed: %v", i, len(lines), err)})
			return
		}
		a := Accepted{EventID: l.env.EventID, Sequence: ack.Sequence, Duplicate: ack.Duplicate}
		if ack.Duplicate {
			// JetStream kept the first message with this key and answers with its sequence: a
			// retry of the same envelope is answered as that one; another envelope under a used
			// key is a conflict (it was not stored, so its event id must not be answered).
			first, err := s.stored(r.Context(), ack.Sequence)
			if err != nil {
				s.cfg.Logger.Error("reading the first event of a reused idempotency key failed", "seq", ack.Sequence, "err", err)
				writeProblem(w, http.StatusServiceUnavailable, "unavailable", "edge could not compare this envelope with the one first stored under its idempotencyKey; retry",
					fieldError{Field: "/idempotencyKey", Line: l.n, Message: fmt.Sprintf("%d of %d envelopes were published before this one: %v", i, len(lines), err)})
				return
			}
			if !sameJSON(first.raw, l.raw) {
				msg := fmt.Sprintf("the key %q was first used for event %s with another body; use a new idempotencyKey for a new event (a retry resends the first body unchanged)", l.env.IdempotencyKey, first.eventID)
				if len(lines) > 1 {
					msg += fmt.Sprintf(" (%d of %d envelopes were published before this one)", i, len(lines))
				}
				writeProblem(w, http.StatusConflict, "idempotency_conflict", "idempotencyKey reused with another body: this envelope was not published",
					fieldError{Field: "/idempotencyKey", Line: l.n, Message: msg})
				return
			}
			a.EventID = first.eventID
		}
		s.m.published.Inc()
		out.Accepted = append(out.Accepted, a)
	}
	if ct == ctJSON {
		out.EventID = out.Accepted[0].EventID
		w.Header().Set("Location", "/v1/events/"+out.EventID+"/outcome")
	}
	writeJSON(w, http.StatusAccepted, out)
}

// storedEvent is an envelope as JetStream stored it.
type storedEvent struct {
	eventID string
	raw     []byte
}

// stored reads the envelope at seq of stream WORLD (the first one published under a reused
// idempotency key).
func (s *Server) stored(ctx context.Context, seq uint64) (*storedEvent, error) {
	st, err := s.cfg.JetStream.Stream(ctx, events.StreamWorld)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", events.StreamWorld, err)
	}
	m, err := st.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("message %d of %s: %w", seq, events.StreamWorld, err)
	}
	var id struct {
		EventID string `json:"eventId"`
	}
	if err := json.Unmarshal(m.Data, &id); err != nil {
		return nil, fmt.Errorf("message %d of %s is not an envelope: %w", seq, events.StreamWorld, err)
	}
	return &storedEvent{eventID: id.EventID, raw: m.Data}, nil
}

// sameJSON reports whether a and b are the same JSON text but for insignificant whitespace.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// deadline is a context that ends at d or when the server stops.
func (s *Server) deadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, d)
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
