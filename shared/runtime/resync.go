package runtime

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// An ordered consumer (Consumer.OrderKey) keeps a key's messages in the order they reach it,
// which is stream order only if every delivery reaches it. One can be lost on the way: the
// server counts a message as delivered when it sends it, and a connection that drops (a NATS
// node killed, a reconnect), or a pull request the server finds gone, loses what was on the
// wire. The server redelivers it only after its ack wait, and meanwhile the next message of
// its key arrives and would be handled first: chaos saw a player's second move pass the rate
// gate, and commit, 20 s before the first, lost when a NATS node died.
//
// So an ordered consumer resynchronises when a delivery may have been lost: after a reconnect
// of its connection, after a consume error (missed heartbeats, a consumer leader change), and,
// on an exclusive consumer (a partition's pinned group), after a gap in the consumer's delivery
// sequence and at its first delivery (the partition's previous owner may have lost one as it
// gave the partition up). It then holds what arrives, keeping it in progress, until an ack wait has passed
// (by then the lost ones were redelivered: first), and hands what it held out in stream order.
// It ends sooner when nothing can have been lost: the delivery sequence skipped no number and
// every message the server counts as pending here has arrived (its NumAckPending equals the
// messages this worker holds). A second failure while it holds (another reconnect, another
// consume error) may lose the redelivery too, or delay it while the consumer's pull requests
// and leader come back: the hold then lasts an ack wait past that failure, and no longer ends
// on the server's count. (Chaos saw a partition hold a player's second move for its ack wait
// after a NATS node died, a second node die in between, the first move's redelivery come 1.3 s
// after the hold ended, and the second move commit first.)
type resync struct {
	mu         sync.Mutex
	active     bool
	buf        []jetstream.Msg
	lastDseq   uint64 // the consumer sequence of the last delivery
	reconnects uint64 // the connection's reconnects at the last delivery
	suspect    bool   // a consume error since the last delivery
	// skipped: the delivery sequence skipped a number since the resynchronisation began (or
	// just before it): a delivery went elsewhere, lost on the way or to another replica. The
	// server's pending count alone cannot be trusted then (a NATS node that led the consumer
	// died, and its successor's count is not this worker's), so the resynchronisation lasts
	// its ack wait.
	skipped bool
	// routine: the resynchronisation checks a first delivery, nothing suggested a loss.
	routine bool
	// down: the connection was down at the resynchronisation's last look.
	down bool
}

// markSuspect records that a delivery may have been lost (a consume error).
func (s *subscriber) markSuspect() {
	s.rs.mu.Lock()
	s.rs.suspect = true
	s.rs.mu.Unlock()
}

// connected reports whether the subscriber's connection is up.
func (s *subscriber) connected() bool {
	nc := s.js.Conn()
	return nc != nil && nc.IsConnected()
}

// reconnects is how often the subscriber's connection has reconnected.
func (s *subscriber) reconnects() uint64 {
	nc := s.js.Conn()
	if nc == nil {
		return 0
	}
	return nc.Stats().Reconnects
}

// intake takes a delivery from the consume callback (in delivery order): it dispatches it, or,
// while the consumer resynchronises, holds it.
func (s *subscriber) intake(jm jetstream.Msg) {
	if s.spec.OrderKey == nil {
		s.dispatch(jm)
		return
	}
	meta, err := jm.Metadata()
	if err != nil {
		s.dispatch(jm) // dispatch terminates it
		return
	}
	rc := s.reconnects()
	s.rs.mu.Lock()
	dseq := meta.Sequence.Consumer
	skipped := s.rs.lastDseq != 0 && dseq != s.rs.lastDseq+1
	if s.rs.active {
		s.rs.skipped = s.rs.skipped || skipped
		s.rs.lastDseq = dseq
		s.hold(jm)
		s.inflight.Add(1) // held here: a Close waits for it to be handed out (and back)
		s.rs.buf = append(s.rs.buf, jm)
		s.rs.mu.Unlock()
		return
	}
	gap := s.spec.group != "" && skipped
	// The first delivery of an exclusive consumer (a partition just taken): its previous owner
	// may have received a message after this one's start found none held, and lost it on the
	// way as it gave the partition up (TestAPartitionsFirstDeliveryWaitsForOneLostByThePreviousOwner).
	first := s.spec.group != "" && s.rs.lastDseq == 0
	reconnected, suspect := rc != s.rs.reconnects, s.rs.suspect
	lost := suspect || reconnected || gap
	s.rs.lastDseq, s.rs.reconnects, s.rs.suspect, s.rs.skipped = dseq, rc, false, skipped
	if !lost && !first {
		s.rs.mu.Unlock()
		s.dispatch(jm)
		return
	}
	s.rs.active, s.rs.routine = true, !lost
	s.hold(jm)
	s.inflight.Add(1)
	s.rs.buf = append(s.rs.buf[:0], jm)
	s.rs.mu.Unlock()
	if lost {
		s.log.Info("a delivery may have been lost on the way: holding this consumer's messages until the server's pending ones arrived or can be redelivered",
			"consumer", s.spec.Durable, "reconnected", reconnected, "consumeError", suspect, "deliveryGap", gap)
	} else {
		s.log.Debug("first delivery of an exclusive consumer: holding it until no earlier message is held elsewhere", "consumer", s.spec.Durable)
	}
	go s.settleResync(time.Now())
}

// settleResync waits until nothing the server counts as pending here is missing, or an ack
// wait (and a little) has passed since the possible loss, then hands out the held deliveries in
// stream order and ends the resynchronisation.
func (s *subscriber) settleResync(since time.Time) {
	holdFor := s.spec.AckWait + 200*time.Millisecond
	deadline := time.NewTimer(time.Until(since.Add(holdFor)))
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	early, failures := false, 0
wait:
	for {
		select {
		case <-deadline.C:
			break wait
		case <-s.closing:
			break wait // handed back in stream order below
		case <-poll.C:
			rc, down := s.reconnects(), !s.connected()
			s.rs.mu.Lock()
			if rc != s.rs.reconnects || s.rs.suspect || down {
				// Another failure while holding, or the connection still down (nothing can be
				// redelivered): an ack wait from now, whatever the count says.
				if !s.rs.down {
					failures++
				}
				s.rs.reconnects, s.rs.suspect, s.rs.skipped, s.rs.down = rc, false, true, down
				deadline.Reset(holdFor)
			} else {
				s.rs.down = false
			}
			skipped := s.rs.skipped
			s.rs.mu.Unlock()
			if !skipped && s.nothingMissing() {
				early = true
				break wait
			}
		}
	}
	s.rs.mu.Lock()
	defer s.rs.mu.Unlock()
	type taken struct {
		jm  jetstream.Msg
		seq uint64
	}
	held := make([]taken, 0, len(s.rs.buf))
	for _, jm := range s.rs.buf {
		var seq uint64
		if meta, err := jm.Metadata(); err == nil {
			seq = meta.Sequence.Stream
		}
		held = append(held, taken{jm, seq})
	}
	slices.SortStableFunc(held, func(a, b taken) int { return cmp.Compare(a.seq, b.seq) })
	// Dispatched under the lock, so that a delivery arriving meanwhile comes after them.
	for _, t := range held {
		s.dispatch(t.jm) // in flight on its own now
		s.inflight.Done()
	}
	s.rs.buf = s.rs.buf[:0]
	s.rs.active, s.rs.down = false, false
	level := slog.LevelInfo
	if s.rs.routine && early {
		level = slog.LevelDebug // a first delivery with nothing held elsewhere: the usual case
	}
	s.log.Log(context.Background(), level, "resynchronised: the held messages go on in stream order", "consumer", s.spec.Durable,
		"messages", len(held), "waited", time.Since(since).Round(time.Millisecond), "nothingMissing", early, "failuresWhileHolding", failures)
}

// nothingMissing reports whether every message the server counts as delivered and not yet
// acknowledged is held here (distinct stream sequences): then nothing was lost on the way.
// With replicas sharing the consumer the others' count too, and the resynchronisation lasts
// its ack wait.
func (s *subscriber) nothingMissing() bool {
	if s.cons == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := s.cons.Info(ctx)
	if err != nil {
		return false
	}
	s.heldMu.Lock()
	seqs := make(map[uint64]struct{}, len(s.held))
	for jm := range s.held {
		if meta, err := jm.Metadata(); err == nil {
			seqs[meta.Sequence.Stream] = struct{}{}
		}
	}
	s.heldMu.Unlock()
	return info.NumAckPending <= len(seqs)
}
