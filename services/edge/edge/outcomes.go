package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	sse "github.com/tmaxmax/go-sse"

	"github.com/worldgate/worldgate/events"
)

// filterParams are the query parameters of GET /v1/outcomes; each may repeat.
var filterParams = []string{"kind", "actor", "correlationId", "eventId", "locationId", "since", "after"}

// watchOptions reads the filters of r's query, refusing unknown parameters and bad values,
// and restricts the actors to those k may read.
func watchOptions(r *http.Request, k *key, allowed []string) (events.WatchOptions, []fieldError) {
	q := r.URL.Query()
	var errs []fieldError
	for name := range q {
		if !slices.Contains(allowed, name) {
			errs = append(errs, fieldError{Field: name, Message: "unknown query parameter: use " + strings.Join(allowed, ", ")})
		}
	}
	var o events.WatchOptions
	for _, v := range q["kind"] {
		if !slices.Contains(events.OutcomeKinds(), events.OutcomeKind(v)) {
			errs = append(errs, fieldError{Field: "kind", Message: fmt.Sprintf("%q is not an outcome kind: use committed, fallback, refused or skipped", v)})
		}
		o.Kinds = append(o.Kinds, events.OutcomeKind(v))
	}
	o.Actors = q["actor"]
	o.CorrelationIDs = q["correlationId"]
	o.EventIDs = q["eventId"]
	o.LocationIDs = q["locationId"]
	for _, name := range []string{"actor", "correlationId", "eventId", "locationId"} {
		for _, v := range q[name] {
			if v == "" || len(v) > 128 {
				errs = append(errs, fieldError{Field: name, Message: "must be 1 to 128 characters"})
			}
		}
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			errs = append(errs, fieldError{Field: "since", Message: "must be an RFC 3339 time, e.g. 2026-11-23T10:00:00Z"})
		}
		o.Since = t
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			errs = append(errs, fieldError{Field: "after", Message: "must be a cursor: the id of an outcome event received before"})
		}
		o.After = n
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			errs = append(errs, fieldError{Field: "Last-Event-ID", Message: "must be the id of an outcome event received before"})
		}
		o.After = n
	}
	if !k.readsAll() {
		mine := k.readable()
		if len(o.Actors) == 0 {
			o.Actors = mine
		}
		for _, a := range o.Actors {
			if !slices.Contains(mine, a) {
				errs = append(errs, fieldError{Field: "actor", Message: fmt.Sprintf("key %q may not read the outcomes of %s", k.Name, a)})
			}
		}
	}
	return o, errs
}

func status(errs []fieldError) int {
	for _, e := range errs {
		if strings.Contains(e.Message, "may not read") {
			return http.StatusForbidden
		}
	}
	return http.StatusBadRequest
}

// outcomes streams outcomes as Server-Sent Events: event "outcome", id = the stream cursor
// (what Last-Event-ID resumes from), data = the outcome JSON. A client that stays SSEBuffer
// outcomes behind for WriteTimeout, or whose write blocks WriteTimeout, gets an event
// "dropped" (when it can still be written) and the stream ends; it reconnects with
// Last-Event-ID and loses nothing. Each stream has its own consumer: a slow one blocks no other.
func (s *Server) outcomes(w http.ResponseWriter, r *http.Request, k *key) {
	opts, errs := watchOptions(r, k, filterParams)
	if len(errs) > 0 {
		writeProblem(w, status(errs), "invalid_query", "invalid outcome filter", errs...)
		return
	}
	if opts.After == 0 && opts.Since.IsZero() {
		opts.FromStart = false // from now on
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	watch, err := events.Watch(ctx, s.cfg.JetStream, opts)
	if err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "the outcome stream cannot be read now; retry", fieldError{Field: "", Message: err.Error()})
		return
	}
	defer watch.Close()
	sess, err := sse.Upgrade(w, r)
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "sse", "streaming is not supported on this connection", fieldError{Field: "", Message: err.Error()})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	s.m.streams.Inc()
	defer s.m.streams.Dec()

	buf := make(chan events.Delivery, s.cfg.SSEBuffer)
	overflow := make(chan uint64, 1) // the cursor of the last outcome the client will have
	go func() {
		defer close(buf)
		for {
			d, err := watch.Next(ctx)
			if s.refuse(err) {
				continue
			}
			if err != nil {
				return
			}
			select {
			case buf <- d:
				continue
			default:
			}
			// Full: the writer is behind. A client that reads keeps up within WriteTimeout;
			// one that does not is dropped, and resumes from what it received.
			t := time.NewTimer(s.cfg.WriteTimeout)
			select {
			case buf <- d:
				t.Stop()
			case <-t.C:
				overflow <- d.Cursor
				cancel()
				return
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
	}()
	// An opening comment: the client knows the stream is live before the first outcome.
	open := &sse.Message{}
	open.AppendComment("outcomes")
	if err := s.send(rc, sess, open); err != nil {
		return
	}
	beat := time.NewTicker(s.cfg.Heartbeat)
	defer beat.Stop()
	last := opts.After
	for {
		select {
		case d, ok := <-buf:
			if !ok {
				s.dropIfOverflowed(rc, sess, overflow, last, r.Context(), len(buf))
				return
			}
			data, err := json.Marshal(d.Outcome)
			if err != nil {
				return
			}
			m := &sse.Message{ID: sse.ID(strconv.FormatUint(d.Cursor, 10)), Type: sse.Type("outcome")}
			m.AppendData(string(data))
			if err := s.send(rc, sess, m); err != nil {
				s.m.dropped.Inc()
				return
			}
			last = d.Cursor
		case <-beat.C:
			hb := &sse.Message{}
			hb.AppendComment("keep-alive")
			if err := s.send(rc, sess, hb); err != nil {
				return
			}
		case <-ctx.Done():
			s.dropIfOverflowed(rc, sess, overflow, last, r.Context(), len(buf))
			return
		}
	}
}

// dropIfOverflowed ends a stream whose client fell behind: the pump overflowed (the client is
// told, and counted), or net/http cancelled the request because a write to the client failed
// (its deadline passed) while outcomes were still waiting for it. net/http reports such a
// failed write only by cancelling the request's context, so a client that leaves while
// nothing is waiting for it is not counted, and one cut off while behind is.
func (s *Server) dropIfOverflowed(rc *http.ResponseController, sess *sse.Session, overflow chan uint64, last uint64, req context.Context, waiting int) {
	select {
	case <-overflow:
	default:
		if req.Err() != nil && waiting > 0 {
			s.m.dropped.Inc()
		}
		return
	}
	s.m.dropped.Inc()
	m := &sse.Message{Type: sse.Type("dropped")}
	m.AppendData(fmt.Sprintf(`{"reason":"the client read too slowly: %d outcomes were waiting","resumeAfter":%d}`, s.cfg.SSEBuffer, last))
	_ = s.send(rc, sess, m)
}

func (s *Server) send(rc *http.ResponseController, sess *sse.Session, m *sse.Message) error {
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	if err := sess.Send(m); err != nil {
		return err
	}
	return sess.Flush()
}

// Reasons an outcome is not delivered (worldgate_edge_outcomes_dropped_total).
const (
	dropMisrouted   = "misrouted"   // its body does not match its subject: a forgery
	dropUndecodable = "undecodable" // not an outcome this edge can read (a newer schema, say)
)

// refuse reports whether err is an outcome the watch met and must not deliver (the watch goes
// on); it counts and logs it. Readers show outcomes to players: a body that claims a kind or
// actor its subject does not — a refusal publisher's "committed" line — never reaches them.
func (s *Server) refuse(err error) bool {
	var bad *events.UndecodableError
	if !errors.As(err, &bad) {
		return false
	}
	reason := dropUndecodable
	var mis *events.MisroutedError
	if errors.As(err, &mis) {
		reason = dropMisrouted
	}
	s.m.refused.WithLabelValues(reason).Inc()
	s.cfg.Logger.Warn("outcome not delivered", "reason", reason, "seq", bad.Cursor, "err", err)
	return true
}

// OutcomeResponse is GET /v1/events/{id}/outcome's answer.
type OutcomeResponse struct {
	EventID  string            `json:"eventId"`
	Outcomes []*events.Outcome `json:"outcomes"`
}

// answerNow is how long a long poll with wait=0 reads what is stored before it answers, and
// how long one about an event stream WORLD does not hold waits for a stored outcome first.
const answerNow = 300 * time.Millisecond

// eventIDParam reads an {id} path parameter that must be an envelope's eventId (a UUIDv7).
func eventIDParam(id string) (uuid.UUID, []fieldError) {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 {
		return u, []fieldError{{Field: "id", Message: "must be the eventId of an envelope (a UUIDv7)"}}
	}
	return u, nil
}

// outcome long-polls the final outcome of one event. Every event the agents consume gets one
// (committed, fallback, refused, or skipped: the role decided not to act on it), so:
//   - 200 with the outcome as soon as it is decided (or at once if it was already);
//   - 204 when wait seconds pass first: the event is stored (or cannot be looked up now) and
//     still pending: ask again (Retry-After: 0);
//   - 404 when stream WORLD holds no event with this id that the key may read (never
//     published, or not yet: poll after the publish is acknowledged) and no outcome is stored.
//
// wait=0 answers now: 200 with the outcome stored, else 204 or 404.
func (s *Server) outcome(w http.ResponseWriter, r *http.Request, k *key) {
	id := r.PathValue("id")
	u, errs := eventIDParam(id)
	wait := 25 * time.Second
	q := r.URL.Query()
	for name := range q {
		if name != "wait" && name != "actor" {
			errs = append(errs, fieldError{Field: name, Message: "unknown query parameter: use wait, actor"})
		}
	}
	if v := q.Get("wait"); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 || time.Duration(n*float64(time.Second)) > s.cfg.LongPollMax {
			errs = append(errs, fieldError{Field: "wait", Message: fmt.Sprintf("seconds to wait, 0 to %g", s.cfg.LongPollMax.Seconds())})
		}
		wait = time.Duration(n * float64(time.Second))
	}
	opts, ferrs := watchOptions(r, k, []string{"wait", "actor"})
	for _, e := range ferrs {
		if !strings.HasPrefix(e.Message, "unknown query parameter") {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		writeProblem(w, status(errs), "invalid_request", "invalid outcome request", errs...)
		return
	}
	start := time.Now()
	// The event id is a UUIDv7: it carries the time it was made. Outcomes come after it.
	sec, nsec := u.Time().UnixTime()
	opts.Since = time.Unix(sec, nsec).Add(-2 * time.Second)
	opts.EventIDs = []string{id}
	// The watch starts whatever the wait: wait=0 asks for what is stored now, which takes a
	// read of the stream (at least answerNow), not no time at all.
	watch, err := events.Watch(r.Context(), s.cfg.JetStream, opts)
	if err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "the outcome stream cannot be read now; retry", fieldError{Field: "", Message: err.Error()})
		return
	}
	defer watch.Close()
	ctx, cancel := s.deadline(r.Context(), max(wait, answerNow))
	defer cancel()
	type next struct {
		d   events.Delivery
		err error
	}
	decided := make(chan next, 1)
	go func() {
		for {
			d, err := watch.Next(ctx)
			if s.refuse(err) {
				continue
			}
			decided <- next{d, err}
			return
		}
	}()
	// Meanwhile: is there such an event at all? An event of an actor the key may not read is
	// as unknown to it as one never published.
	known := make(chan error, 1)
	go func() {
		e, err := events.FindEvent(ctx, s.cfg.JetStream, id)
		if err == nil && len(opts.Actors) > 0 && !slices.Contains(opts.Actors, e.Actor.ID) {
			err = events.ErrUnknownEvent
		}
		known <- err
	}()
	var unknown <-chan time.Time
	isUnknown := false
	for {
		select {
		case n := <-decided:
			switch {
			case n.err != nil && ctx.Err() != nil && isUnknown:
				writeUnknown(w, id)
			case n.err != nil && ctx.Err() != nil:
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusNoContent)
			case n.err != nil:
				writeProblem(w, http.StatusServiceUnavailable, "unavailable", "the outcome stream failed; retry", fieldError{Field: "", Message: n.err.Error()})
			default:
				writeJSON(w, http.StatusOK, OutcomeResponse{EventID: id, Outcomes: []*events.Outcome{n.d.Outcome}})
			}
			return
		case err := <-known:
			known = nil
			if errors.Is(err, events.ErrUnknownEvent) {
				// An outcome may outlive its event in WORLD: answer unknown only once the
				// stored outcomes have had time to arrive.
				isUnknown = true
				unknown = time.After(time.Until(start.Add(answerNow / 2)))
			} else if err != nil && ctx.Err() == nil {
				s.cfg.Logger.Debug("cannot tell whether the event is stored; answering pending", "eventId", id, "err", err)
			}
		case <-unknown:
			writeUnknown(w, id)
			return
		}
	}
}

// writeUnknown is the long poll's answer about an event stream WORLD does not hold (for the key).
func writeUnknown(w http.ResponseWriter, id string) {
	writeProblem(w, http.StatusNotFound, "unknown_event", "unknown event",
		fieldError{Field: "id", Message: fmt.Sprintf("Worldgate holds no world event %s that this key may read: it was never published (or not yet: ask after POST /v1/events or events.Publish is acknowledged), or it names another actor; nothing will be decided for it", id)})
}
