package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx"
)

// Stage is where the committed events of a run spent their time between two points the
// streams record.
type Stage struct {
	Name  string  `json:"name"`
	P50ms float64 `json:"p50Ms"`
	P95ms float64 `json:"p95Ms"`
	P99ms float64 `json:"p99Ms"`
}

// Stages splits the time from world event to commit of every proposal committed in the given
// stream ranges (messages after from and up to to, by stream sequence, as StreamSeqs reads them)
// whose correlation id begins with prefix, and returns the stages' percentiles in route order:
//
//   - "agent": the world event stored on WORLD → the agent's proposal stored on PROPOSALS;
//   - one per gate of the trail: the previous point → the gate's hop (its "at"); the first
//     gate's includes the delivery of the proposal, a split route's each hop's;
//   - "to validated": the last gate's hop → the proposal stored on proposals.validated;
//   - "commit": stored on proposals.validated → the domain event stored on COMMITTED (the
//     event-processor: delivery, checks, the graph's write, the publish).
//
// The points come from two clocks: JetStream's timestamps (the NATS server's) and each gate's
// "at" (the gate host's); on one machine they are one clock. Events that took more than one
// proposal (a reprompt) or were not committed are left out.
func Stages(ctx context.Context, js jetstream.JetStream, from, to map[string]uint64, prefix string) ([]Stage, error) {
	world := map[string]time.Time{}    // correlation id → WORLD stored
	proposed := map[string]time.Time{} // proposal id → first stored on PROPOSALS
	type validated struct {
		at    time.Time
		corr  string
		trail []events.Hop
	}
	valid := map[string]validated{}
	committed := map[string]time.Time{} // proposal id → first COMMITTED
	err := readRange(ctx, js, events.StreamWorld, from, to, func(m jetstream.Msg, at time.Time) {
		var e struct {
			CorrelationID string `json:"correlationId"`
		}
		if json.Unmarshal(m.Data(), &e) == nil && strings.HasPrefix(e.CorrelationID, prefix) {
			world[e.CorrelationID] = at
		}
	})
	if err == nil {
		err = readRange(ctx, js, events.StreamProposals, from, to, func(m jetstream.Msg, at time.Time) {
			if strings.HasPrefix(m.Subject(), "proposals.rejected.") {
				return
			}
			var p events.Proposal
			if json.Unmarshal(m.Data(), &p) != nil || !strings.HasPrefix(p.CorrelationID, prefix) {
				return
			}
			if _, ok := proposed[p.ProposalID]; !ok {
				proposed[p.ProposalID] = at
			}
			if events.IsValidated(m.Subject()) {
				if _, ok := valid[p.ProposalID]; !ok {
					valid[p.ProposalID] = validated{at: at, corr: p.CorrelationID, trail: p.Route.Trail}
				}
			}
		})
	}
	if err == nil {
		err = readRange(ctx, js, events.StreamCommitted, from, to, func(m jetstream.Msg, at time.Time) {
			var e events.DomainEvent
			if json.Unmarshal(m.Data(), &e) == nil && strings.HasPrefix(e.CorrelationID, prefix) {
				if _, ok := committed[e.ProposalID]; !ok {
					committed[e.ProposalID] = at
				}
			}
		})
	}
	if err != nil {
		return nil, err
	}
	perCorr := map[string]int{}
	for _, v := range valid {
		perCorr[v.corr]++
	}
	var order []string
	times := map[string][]time.Duration{}
	add := func(name string, d time.Duration) {
		if _, ok := times[name]; !ok {
			order = append(order, name)
		}
		times[name] = append(times[name], d)
	}
	ids := make([]string, 0, len(valid))
	for id := range valid {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the same route order whatever the map's
	for _, id := range ids {
		v := valid[id]
		w, okW := world[v.corr]
		c, okC := committed[id]
		if !okW || !okC || perCorr[v.corr] != 1 {
			continue
		}
		prev := proposed[id]
		add("agent", prev.Sub(w))
		for _, h := range v.trail {
			add(h.Gate, h.At.Sub(prev))
			prev = h.At
		}
		add("to validated", v.at.Sub(prev))
		add("commit", c.Sub(v.at))
	}
	// "to validated" and "commit" last, whatever order the gates' names came in.
	for _, last := range []string{"to validated", "commit"} {
		if i := slices.Index(order, last); i >= 0 {
			order = append(slices.Delete(order, i, i+1), last)
		}
	}
	out := make([]Stage, 0, len(order))
	for _, name := range order {
		ds := times[name]
		out = append(out, Stage{Name: name, P50ms: Ms(Percentile(ds, 50)), P95ms: Ms(Percentile(ds, 95)), P99ms: Ms(Percentile(ds, 99))})
	}
	return out, nil
}

// readRange calls f with every message of stream after from[stream] up to to[stream], and the
// time JetStream stored it.
func readRange(ctx context.Context, js jetstream.JetStream, stream string, from, to map[string]uint64, f func(jetstream.Msg, time.Time)) error {
	first, last := from[stream]+1, to[stream]
	if last < first {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err == nil {
		cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: first}
		_, err = natsx.Scan(ctx, s, cfg, last, func(m jetstream.Msg, meta *jetstream.MsgMetadata) bool {
			f(m, meta.Timestamp)
			return false
		})
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", stream, err)
	}
	return nil
}
