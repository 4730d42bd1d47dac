package memory

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/runtime"
)

// Name is the memory-writer's handler name, durable consumer on COMMITTED, service name and
// NATS user.
const Name = "memory-writer"

// Writer keeps the interaction memory from the committed log.
type Writer struct {
	store   *Store
	log     *slog.Logger
	records *prometheus.CounterVec
}

// Outcomes of one committed event (the label of worldgate_memory_events_total).
const (
	OutcomeRecorded  = "recorded"  // a record changed
	OutcomeDuplicate = "duplicate" // recorded before (a redelivery)
	OutcomeIgnored   = "ignored"   // nothing to remember (no NPC concerned)
	OutcomeFull      = "full"      // the bucket is at its size bound: not remembered
)

// NewWriter returns the writer on store; reg receives worldgate_memory_events_total{outcome}.
func NewWriter(store *Store, reg prometheus.Registerer, log *slog.Logger) (*Writer, error) {
	if store == nil {
		return nil, errors.New("memory-writer: a store is required")
	}
	if reg == nil {
		return nil, errors.New("memory-writer: a metrics registerer is required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{store: store, log: log, records: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "worldgate", Name: "memory_events_total",
		Help: "Committed events the memory-writer read, by outcome: recorded (the interaction memory changed), duplicate (a redelivery), ignored (no NPC concerned), full (the memory bucket is at its size bound; not remembered)."},
		[]string{"outcome"})}
	if err := reg.Register(w.records); err != nil {
		return nil, fmt.Errorf("memory-writer: register metrics: %w", err)
	}
	for _, o := range []string{OutcomeRecorded, OutcomeDuplicate, OutcomeIgnored, OutcomeFull} {
		w.records.WithLabelValues(o)
	}
	return w, nil
}

// Register builds a writer and registers its handler on app.
func Register(app *runtime.App, store *Store, reg prometheus.Registerer, log *slog.Logger) (*Writer, error) {
	if app == nil {
		return nil, errors.New("memory-writer: a runtime app is required")
	}
	w, err := NewWriter(store, reg, log)
	if err != nil {
		return nil, err
	}
	app.Handle(Name, Consumer(), w.Handle)
	return w, nil
}

// NamesNoNPC are the domain types whose payloads can name no NPC (their ids are players',
// locations' and directions'; TestSkippedTypesNameNoNPC reads their schemas): nothing of them is
// remembered, so the writer's consumer does not receive them and a player's move costs it
// nothing.
var NamesNoNPC = map[string]bool{"PlayerMoved": true, "ExitAdded": true, "ExitRemoved": true}

// Consumer is the writer's durable consumer: the committed events of every kind whose payload
// can name an NPC (every kind but NamesNoNPC; a new kind is included).
func Consumer() runtime.Consumer {
	var subjects []string
	for _, k := range events.Kinds() {
		if !NamesNoNPC[k.DomainType] {
			subjects = append(subjects, events.CommittedSubject(k.DomainType))
		}
	}
	return runtime.Consumer{Stream: events.StreamCommitted, Durable: Name, Subjects: subjects}
}

// Handle records one committed event. It publishes nothing. An undecodable event is
// dead-lettered (runtime.Permanent); a KV outage is retried; a full bucket is counted and
// logged, and the event acknowledged: memory is a bounded cache of COMMITTED, and a lost
// exchange must not hold up the ones after it.
func (w *Writer) Handle(msg *message.Message) ([]*message.Message, error) {
	ctx := msg.Context()
	var evt events.DomainEvent
	if err := json.Unmarshal(msg.Payload, &evt); err != nil || evt.EventID == "" {
		return nil, runtime.Permanentf("not a committed domain event (%v): the memory-writer reads only what the event-processor publishes", err)
	}
	n, err := w.store.Record(ctx, evt)
	switch {
	case errors.Is(err, ErrFull):
		w.records.WithLabelValues(OutcomeFull).Inc()
		logx.From(ctx, w.log).Warn("Memory.Dropped", "eventId", evt.EventID, "type", evt.Type, "reason", err.Error())
		return nil, nil
	case errors.Is(err, errPayload):
		return nil, runtime.Permanent(err)
	case err != nil:
		return nil, err
	}
	u, _ := FromCommitted(evt)
	switch {
	case n > 0:
		w.records.WithLabelValues(OutcomeRecorded).Inc()
	case u.Dialogue == nil && len(u.Notes) == 0:
		w.records.WithLabelValues(OutcomeIgnored).Inc()
	default:
		w.records.WithLabelValues(OutcomeDuplicate).Inc()
	}
	return nil, nil
}
