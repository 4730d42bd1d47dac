package aiworker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/ai-worker/agent"
)

// ExitChangeSubjects are the committed events that change a location's exits. The ai-worker
// follows them on stream COMMITTED (ordered consumers of its own) to drop its cached
// list-exits answers (agent.ExitsCache).
func ExitChangeSubjects() []string {
	var out []string
	for _, kind := range []string{events.KindExitAdded, events.KindExitRemoved} {
		info, _ := events.LookupKind(kind)
		out = append(out, events.CommittedSubject(info.DomainType))
	}
	return out
}

// exitWatch keeps an agent.ExitsCache honest: each committed exit change drops its
// location's answer, and the cache is told (agent.ExitsWatch) when changes may have been
// missed.
type exitWatch struct {
	nc       *nats.Conn
	cache    *agent.ExitsCache
	log      *slog.Logger
	consumes []jetstream.ConsumeContext
	// closed are the consumers' Closed channels, taken once: an ordered consumer's Closed
	// starts a goroutine that lives until the consumer stops, so asking for it on every look
	// (state runs on every move) leaked two goroutines per move.
	closed []<-chan struct{}
	errs   atomic.Uint64 // consume errors: each may have delayed or lost a notice
}

// watchExits follows the committed exit changes from now on and returns the cache they keep.
// Ordered consumers resume after a gap where they left off; the cache is still flushed on a
// reconnect or a consume error, and unused while disconnected. It fails when the server
// refuses the consumers (the ai-worker's NATS user lacks them) rather than run a cache that
// nothing invalidates.
func watchExits(ctx context.Context, js jetstream.JetStream, ttl time.Duration, log *slog.Logger) (*agent.ExitsCache, error) {
	w, err := followExits(ctx, js, ttl, log)
	if err != nil {
		return nil, err
	}
	return w.cache, nil
}

// followExits starts the ordered consumers of the exit changes and the cache they keep.
func followExits(ctx context.Context, js jetstream.JetStream, ttl time.Duration, log *slog.Logger) (*exitWatch, error) {
	w := &exitWatch{nc: js.Conn(), log: log}
	w.cache = agent.NewExitsCache(ttl, w.state, nil)
	for _, subject := range ExitChangeSubjects() {
		c, err := js.OrderedConsumer(ctx, events.StreamCommitted, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverNewPolicy})
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("follow %s for the exits cache: %w", subject, err)
		}
		cc, err := c.Consume(w.changed, jetstream.ConsumeErrHandler(w.failed))
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("follow %s for the exits cache: %w", subject, err)
		}
		w.consumes, w.closed = append(w.consumes, cc), append(w.closed, cc.Closed())
	}
	return w, nil
}

func (w *exitWatch) stop() {
	for _, cc := range w.consumes {
		cc.Stop()
	}
}

// changed drops the answer of the location whose exits a committed event changed; a notice
// it cannot read drops every answer.
func (w *exitWatch) changed(m jetstream.Msg) {
	var evt struct {
		Payload struct {
			FromLocationID string `json:"fromLocationId"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(m.Data(), &evt); err != nil || evt.Payload.FromLocationID == "" {
		w.log.Warn("unreadable committed exit change: dropping every cached exits answer", "subject", m.Subject())
		w.cache.Flush()
		return
	}
	w.cache.Invalidate(evt.Payload.FromLocationID)
}

func (w *exitWatch) failed(_ jetstream.ConsumeContext, err error) {
	w.errs.Add(1)
	w.log.Debug("following committed exit changes", "error", err.Error())
}

// state is the cache's agent.ExitsWatch: it hears changes while connected with every
// consumer running; the epoch counts reconnects and consume errors, after either of which a
// change may have been missed.
func (w *exitWatch) state() (ok bool, epoch uint64) {
	if !w.nc.IsConnected() {
		return false, 0
	}
	for _, closed := range w.closed {
		select {
		case <-closed:
			return false, 0
		default:
		}
	}
	return true, w.nc.Stats().Reconnects + w.errs.Load()
}
