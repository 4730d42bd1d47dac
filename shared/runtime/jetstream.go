package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx"
)

// A consumer's pull requests last pullExpiry, and the server sends a heartbeat every
// pullHeartbeat while one waits; two missed heartbeats make nats.go ask again.
const (
	pullExpiry    = 10 * time.Second
	pullHeartbeat = time.Second
)

// MaxDeliverLimit is the largest MaxDeliver a consumer may have (a larger one is lowered to it).
const MaxDeliverLimit = natsx.MaxDeliverBound - natsx.DeadLetterAttempts

// Consumer describes the durable pull consumer a handler reads from. Replicas of a worker
// share it, so each message goes to one of them.
type Consumer struct {
	Stream   string
	Durable  string
	Subjects []string
	// MaxDeliver is how many deliveries a failing message gets before it is dead-lettered.
	// Default 5; at most MaxDeliverLimit.
	MaxDeliver int
	// Backoff is the delay before the n-th redelivery (the last entry repeats).
	// Default 500ms, 2s, 5s, 15s.
	Backoff []time.Duration
	// AckWait is how long a delivered message may go without news from its worker before
	// JetStream redelivers it: how soon a crashed worker's messages come back. A live worker
	// tells JetStream every AckWait/3 that the messages it holds (queued or being handled) are
	// in progress, so AckWait need not cover a slow handler. Default 10s.
	AckWait time.Duration
	// MaxHold is how long a worker keeps one message in progress from the moment its handler
	// starts; past it, the worker stops extending it and JetStream redelivers it after AckWait (a
	// handler that hangs). The time a message waits for its turn behind earlier messages of its
	// order key does not count: each of those is bounded by its own MaxHold, and a message
	// redelivered while its first delivery still waits here would be decided twice and join the
	// back of its key's queue (after a flood, one player's queue grew with such copies for 16
	// minutes). Default 2 minutes, at least AckWait.
	MaxHold time.Duration
	// MaxAckPending bounds the messages in flight across every replica. Default 512.
	MaxAckPending int
	// OrderKey, if set, keeps the messages of one key in stream order within a replica: a
	// message is handed to the handler only once the previous message with its key has been
	// settled (acknowledged or handed back), while messages of other keys run concurrently. A
	// message whose key is "" is not ordered.
	// A message handed back for redelivery (a transient failure) keeps the next ones of its key
	// waiting until it comes back and settles: the worker keeps it in progress through its
	// backoff and then hands it back for redelivery at once, and the key waits up to two AckWaits
	// more for it (if its redelivery goes to another replica, the key goes on without it).
	//
	// The order holds across a crash too: a replica that starts while messages of the consumer
	// are held elsewhere (by a process that died holding them, or by another replica) takes no
	// message until AckWait has passed, so that the held ones, redelivered first, reach it before
	// any newer message of their key; it takes them all and hands them out in stream order. A
	// worker that stops gracefully hands the messages of a key back in stream order.
	OrderKey func(subject string, data []byte) string
	// Partitioned, if set, spreads the consumer over its stream's partitions, each consumed by
	// one replica at a time (see Partitioned): replicas share the work and each order key's
	// messages stay in stream order across them. Subjects is then unused.
	Partitioned *Partitioned

	group string // the pinned priority group of a partition's consumer (set by partitionGroup)
}

func (c *Consumer) setDefaults() {
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 5
	}
	c.MaxDeliver = min(c.MaxDeliver, MaxDeliverLimit)
	if len(c.Backoff) == 0 {
		c.Backoff = []time.Duration{500 * time.Millisecond, 2 * time.Second, 5 * time.Second, 15 * time.Second}
	}
	if c.AckWait <= 0 {
		c.AckWait = 10 * time.Second
	}
	if c.MaxHold <= 0 {
		c.MaxHold = 2 * time.Minute
	}
	c.MaxHold = max(c.MaxHold, c.AckWait)
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 512
	}
}

func (c *Consumer) backoff(deliveries int) time.Duration {
	i := min(max(deliveries-1, 0), len(c.Backoff)-1)
	return c.Backoff[i]
}

// subscriber runs a handler over one durable JetStream pull consumer (start).
type subscriber struct {
	js   jetstream.JetStream
	spec Consumer
	log  *slog.Logger

	handle func(*message.Message) error // the handler chain: nil error acknowledges
	run    func(func())                 // runs a message's handling and settlement (App's pooled goroutines)

	closeOnce  sync.Once
	closing    chan struct{}
	subscribed atomic.Bool
	inflight   sync.WaitGroup
	stopped    chan struct{}

	tailMu   sync.Mutex
	tails    map[string]*link       // per order key: its latest message
	awaiting map[uint64]*handedBack // by stream sequence: ordered messages handed back for redelivery

	cons jetstream.Consumer // set by start
	rs   resync             // an ordered consumer's resynchronisation after a delivery lost on the way

	heldMu   sync.Mutex
	held     map[jetstream.Msg]holding // delivered and not yet settled
	keepStop chan struct{}             // closed by Close, once what was in flight settled or AckWait passed
	keepOnce sync.Once
}

func newSubscriber(js jetstream.JetStream, spec Consumer, log *slog.Logger) *subscriber {
	return &subscriber{js: js, spec: spec, log: log, closing: make(chan struct{}), stopped: make(chan struct{}),
		held: map[jetstream.Msg]holding{}, keepStop: make(chan struct{})}
}

// keep tells JetStream, every AckWait/3, that the messages this worker holds (queued behind an
// earlier one of their key, waiting for the router, being handled, waiting out a backoff) are in
// progress, so that their ack wait runs out only when the worker is gone or a message was held
// longer than MaxHold. One ticker per consumer: a message held less than AckWait/3 costs nothing.
func (s *subscriber) keep() {
	every := max(s.spec.AckWait/3, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	var due []jetstream.Msg
	for {
		select {
		case <-s.keepStop:
			return
		case now := <-t.C:
			due = due[:0]
			s.heldMu.Lock()
			for jm, h := range s.held {
				if now.Sub(h.delivered) >= every && (h.started.IsZero() || now.Sub(h.started) < s.spec.MaxHold) {
					due = append(due, jm)
				}
			}
			s.heldMu.Unlock()
			for _, jm := range due {
				_ = jm.InProgress()
			}
		}
	}
}

// holding is a message this worker holds: when it was delivered, and when its handler started
// (zero while it waits for its turn).
type holding struct {
	delivered, started time.Time
}

func (s *subscriber) hold(jm jetstream.Msg) {
	s.heldMu.Lock()
	s.held[jm] = holding{delivered: time.Now()}
	s.heldMu.Unlock()
}

// handling starts jm's MaxHold: its handler runs.
func (s *subscriber) handling(jm jetstream.Msg) {
	s.heldMu.Lock()
	if h, ok := s.held[jm]; ok {
		h.started = time.Now()
		s.held[jm] = h
	}
	s.heldMu.Unlock()
}

func (s *subscriber) release(jm jetstream.Msg) {
	s.heldMu.Lock()
	delete(s.held, jm)
	s.heldMu.Unlock()
}

// ServerConfig is the consumer's configuration on the server. The runtime dead-letters a
// message on its MaxDeliver-th delivery; the server's limit leaves natsx.DeadLetterAttempts
// more deliveries for a dead letter that could not be published, and on the last of them the
// runtime terminates the message: nothing is redelivered for ever.
func (c Consumer) ServerConfig() jetstream.ConsumerConfig {
	c.setDefaults()
	cfg := jetstream.ConsumerConfig{
		Durable:        c.Durable,
		FilterSubjects: c.Subjects,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.AckWait,
		MaxDeliver:     c.serverMaxDeliver(),
		MaxAckPending:  c.MaxAckPending,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if c.group != "" {
		// One client at a time; the pin moves when its client unpins (it gave the partition up,
		// its messages settled) or sends no pull request for an ack wait (it died: by then its
		// messages can be redelivered, first, to the next).
		cfg.PriorityPolicy, cfg.PriorityGroups, cfg.PinnedTTL = jetstream.PriorityPolicyPinned, []string{c.group}, c.AckWait
		if len(c.Subjects) == 1 {
			// One filter goes in the create request's subject, where NATS permissions can
			// restrict it: a worker may create partitions' durables of any name, but only over
			// its partitions' subjects (natsauth.Consumer.Partitions).
			cfg.FilterSubject, cfg.FilterSubjects = c.Subjects[0], nil
		}
	}
	return cfg
}

func (c *Consumer) serverMaxDeliver() int { return c.MaxDeliver + natsx.DeadLetterAttempts }

// ensureConsumer creates the durable consumer or updates it to spec.
func (s *subscriber) ensureConsumer(ctx context.Context) (jetstream.Consumer, error) {
	cfg := s.spec.ServerConfig()
	if err := natsx.CheckConsumer(cfg); err != nil {
		return nil, err
	}
	var c jetstream.Consumer
	err := natsx.Await(ctx, fmt.Sprintf("consumer %s on stream %s", s.spec.Durable, s.spec.Stream), s.log, func(ctx context.Context) (err error) {
		c, err = s.js.CreateOrUpdateConsumer(ctx, s.spec.Stream, cfg)
		return err
	})
	return c, err
}

// start consumes c's messages until stopIntake: each one is handed, in its turn (one order
// key's messages one after the other), to handle on a goroutine of run, which also settles it
// (acknowledges it when handle returns nil, hands it back for redelivery otherwise). One
// goroutine takes a message from delivery to settlement: a hand-over between goroutines on
// different threads is a futex wake-up on each side, dear on a virtual machine.
func (s *subscriber) start(ctx context.Context, handle func(*message.Message) error, run func(func())) error {
	s.handle, s.run = handle, run
	cons, err := s.ensureConsumer(ctx)
	if err != nil {
		return err
	}
	s.cons = cons
	s.rs.reconnects = s.reconnects()
	var first []jetstream.Msg // held elsewhere at the start: handed out before any new message
	if s.spec.OrderKey != nil {
		held, err := s.awaitHeld(ctx, cons)
		if err != nil {
			return err
		}
		if held > 0 {
			first = s.takeHeld(ctx, cons, held)
		}
	}
	caughtUp := make(chan struct{})
	go func() {
		defer close(caughtUp)
		for _, jm := range first {
			s.dispatch(jm)
		}
	}()
	opts := []jetstream.PullConsumeOpt{jetstream.PullMaxMessages(min(s.spec.MaxAckPending, 256)),
		// nats.go finds out that the server holds none of its pull requests any more only when
		// their heartbeats stop: with its defaults (30 s requests, 15 s heartbeats) a consumer
		// then waited 30 s with messages pending, as bench saw under bursts. With these, 2 s.
		jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			s.markSuspect() // a delivery may have been lost: see resync
			if errors.Is(err, jetstream.ErrNoHeartbeat) {
				// The server holds none of this consumer's pull requests (or this process was
				// too busy to read its heartbeats): nats.go has asked again.
				s.log.Info("no heartbeat from the consumer's pull requests; asked for messages again", "consumer", s.spec.Durable)
				return
			}
			s.log.Debug("consume", "consumer", s.spec.Durable, "err", err)
		})}
	if s.spec.group != "" {
		opts = append(opts, jetstream.PullPriorityGroup(s.spec.group))
	}
	cc, err := cons.Consume(func(jm jetstream.Msg) { <-caughtUp; s.intake(jm) }, opts...)
	if err != nil {
		s.closeOnce.Do(func() { close(s.closing) }) // what was taken at the start is handed back
		<-caughtUp
		return fmt.Errorf("consume %s: %w", s.spec.Durable, err)
	}
	s.subscribed.Store(true)
	go s.keep()
	go func() {
		<-s.closing
		// Drain, not Stop: the messages already pulled into this client's buffer still reach
		// dispatch, which hands them back at once, in stream order. Dropped, they would stay held
		// until their ack wait ran out, and whoever consumes next would take the newer messages of
		// their keys first.
		cc.Drain()
		<-cc.Closed()
		<-caughtUp
		close(s.stopped)
	}()
	return nil
}

// awaitHeld waits, at the start, for the messages that another instance holds to become
// redeliverable, and returns how many were held: JetStream redelivers a message whose ack wait
// ran out before any new one, so once AckWait has passed since the start they are the first this
// replica gets. Without the wait, a restarted processor would apply a player's later moves before
// the earlier one its crashed predecessor held. Messages held by a live replica are acknowledged
// meanwhile and cost only the wait.
func (s *subscriber) awaitHeld(ctx context.Context, cons jetstream.Consumer) (int, error) {
	info := cons.CachedInfo()
	if info == nil || info.NumAckPending == 0 {
		return 0, nil
	}
	held := info.NumAckPending
	wait := s.spec.AckWait + 100*time.Millisecond // past the server's redelivery check
	s.log.Info("messages of this consumer are held elsewhere: taking none until they settle or can be redelivered first",
		"consumer", s.spec.Durable, "held", held, "wait", wait)
	start := time.Now()
	due := start.Add(wait)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	// A live holder (a replica that gave this partition up) settles them well before: then
	// there is nothing to wait for. A message delivered elsewhere meanwhile (a replica that held
	// the partition for a moment, and died or lost it on the way) comes back an ack wait after
	// that delivery: the wait lasts until then too, up to MaxHold in all.
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-deadline.C:
			return held, nil
		case <-poll.C:
			if i, err := cons.Info(ctx); err == nil {
				if held = i.NumAckPending; held == 0 {
					return 0, nil
				}
				if last := i.Delivered.Last; last != nil && last.Add(wait).After(due) && last.After(start) {
					due = last.Add(wait)
					if limit := start.Add(s.spec.MaxHold); due.After(limit) {
						due = limit
					}
					deadline.Reset(time.Until(due))
				}
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-s.closing:
			return 0, errors.New("subscriber closed while waiting for held messages")
		}
	}
}

// takeHeld takes the messages redelivered at the start (those due now, up to held of them) and
// returns them in stream order. JetStream does not always redeliver in stream order: a pull
// request it finds gone (the stopped instance's) sends the message it had taken for it to the
// back of the redelivery queue, so the next message of the key would come first.
func (s *subscriber) takeHeld(ctx context.Context, cons jetstream.Consumer, held int) []jetstream.Msg {
	type taken struct {
		jm  jetstream.Msg
		seq uint64
	}
	var got []taken
	for len(got) < held && ctx.Err() == nil {
		want := min(held-len(got), 256)
		var batch jetstream.MessageBatch
		var err error
		if s.spec.group != "" {
			batch, err = cons.Fetch(want, jetstream.FetchMaxWait(time.Second), jetstream.FetchPriorityGroup(s.spec.group))
		} else {
			batch, err = cons.FetchNoWait(want)
		}
		if err != nil {
			s.log.Warn("could not take the messages held at the start; they are taken as they come", "consumer", s.spec.Durable, "err", err)
			break
		}
		n := 0
		for jm := range batch.Messages() {
			n++
			var seq uint64
			if meta, err := jm.Metadata(); err == nil {
				seq = meta.Sequence.Stream
			}
			got = append(got, taken{jm, seq})
		}
		if n < want {
			break // nothing more is due now
		}
	}
	slices.SortStableFunc(got, func(a, b taken) int { return cmp.Compare(a.seq, b.seq) })
	msgs := make([]jetstream.Msg, len(got))
	for i, t := range got {
		msgs[i] = t.jm
	}
	if len(msgs) > 0 {
		s.log.Info("took the messages held at the start, in stream order", "consumer", s.spec.Durable, "messages", len(msgs))
	}
	return msgs
}

// dispatch hands one JetStream message to the router and settles it in the background, so the
// consume callback returns at once and messages are processed concurrently (bounded by
// MaxAckPending).
func (s *subscriber) dispatch(jm jetstream.Msg) {
	meta, err := jm.Metadata()
	if err != nil {
		s.log.Error("message without JetStream metadata", "subject", jm.Subject(), "err", err)
		_ = jm.Term()
		return
	}
	m := toMessage(jm, meta, s.spec.MaxDeliver)
	var key string
	if s.spec.OrderKey != nil {
		key = s.spec.OrderKey(jm.Subject(), jm.Data())
	}
	seq := meta.Sequence.Stream
	s.hold(jm)
	s.inflight.Add(1)
	var prev, mine *link
	if key != "" {
		s.tailMu.Lock()
		if s.tails == nil {
			s.tails, s.awaiting = map[string]*link{}, map[uint64]*handedBack{}
		}
		if w := s.awaiting[seq]; w != nil {
			// The redelivery of a message of this key that was handed back: the later messages of
			// the key wait for it, so it goes first, in its old place in the chain.
			delete(s.awaiting, seq)
			w.timer.Stop()
			mine = w.link
			mine.left = make(chan struct{})
		} else {
			// dispatch runs in delivery order, so the chain per key is in stream order.
			mine = &link{done: make(chan struct{}), left: make(chan struct{})}
			prev, s.tails[key] = s.tails[key], mine
		}
		s.tailMu.Unlock()
	}
	// settled runs once the message left this worker: acknowledged or terminated (redelivery 0),
	// or handed back for redelivery within redelivery.
	settled := func(redelivery time.Duration) {
		if mine != nil {
			s.tailMu.Lock()
			close(mine.left)
			if redelivery > 0 {
				// The key waits for the redelivery, for as long as its delay and two ack waits
				// (after that, it went to another replica or the consumer is gone). One was not
				// enough: a hand-back lost with a dying NATS node is redelivered an ack wait after
				// the last in-progress, and after a reconnect the pull requests take a moment to
				// come back; chaos saw a redelivery 0.2 s after the key had gone on, and the
				// player's next move pass the invariant gate first.
				w := &handedBack{link: mine}
				w.timer = time.AfterFunc(redelivery+2*s.spec.AckWait, func() {
					s.tailMu.Lock()
					if s.awaiting[seq] != w {
						s.tailMu.Unlock()
						return
					}
					delete(s.awaiting, seq)
					if s.tails[key] == w.link {
						delete(s.tails, key)
					}
					s.tailMu.Unlock()
					close(w.link.done)
				})
				s.awaiting[seq] = w
				s.tailMu.Unlock()
			} else {
				if s.tails[key] == mine {
					delete(s.tails, key)
				}
				s.tailMu.Unlock()
				close(mine.done)
			}
		}
		s.release(jm)
		s.inflight.Done()
	}
	if prev == nil {
		s.handOver(jm, meta, m, mine != nil, settled)
		return
	}
	go func() {
		s.waitTurn(prev)
		s.handOver(jm, meta, m, true, settled)
	}()
}

// link is an ordered message's place in its key's chain.
type link struct {
	done chan struct{} // closed when the message settled for good: the next one of its key may go
	left chan struct{} // closed when it was last acknowledged, terminated or handed back (under tailMu)
}

// handedBack is an ordered message handed back for redelivery (a transient failure): its key
// waits for it to come back, so that the next message of the key does not overtake it.
type handedBack struct {
	link  *link
	timer *time.Timer // gives up waiting when the redelivery does not reach this replica
}

// waitTurn waits until prev (the previous message of the same order key) has settled. When the
// subscriber closes first, it waits only until prev has left this worker, so that the messages of
// a key are handed back to JetStream in stream order.
func (s *subscriber) waitTurn(prev *link) {
	select {
	case <-prev.done:
		return
	case <-s.closing:
	}
	s.tailMu.Lock()
	left := prev.left
	s.tailMu.Unlock()
	select {
	case <-prev.done:
	case <-left:
	}
}

// handOver runs the handler on m and settles jm with its result, on a goroutine of run;
// settled runs after that, once. A handler that holds a message longer than MaxHold no longer
// holds up its order key: the message is settled without an acknowledgement, and JetStream
// redelivers it after its ack wait (its outputs carry the same message ids, so a late success
// is not published twice).
func (s *subscriber) handOver(jm jetstream.Msg, meta *jetstream.MsgMetadata, m *message.Message, ordered bool, settled func(redelivery time.Duration)) {
	select {
	case <-s.closing:
		// Shutting down: give it straight back so another replica takes it now.
		_ = jm.Nak()
		settled(0)
		return
	default:
	}
	s.run(func() {
		s.handling(jm)
		var once sync.Once
		settle := func(redelivery time.Duration) { once.Do(func() { settled(redelivery) }) }
		hold := time.AfterFunc(s.spec.MaxHold, func() {
			s.log.Warn("handler held the message longer than its hold time; it will be redelivered", "subject", jm.Subject(),
				"maxHold", s.spec.MaxHold, "ackWait", s.spec.AckWait)
			settle(0)
		})
		err := s.handleSafely(m)
		if !hold.Stop() {
			return // settled by the hold timer: JetStream redelivers it
		}
		if err == nil {
			m.Ack()
			if aerr := jm.Ack(); aerr != nil {
				s.log.Warn("ack failed; the message will be redelivered", "subject", jm.Subject(), "err", aerr)
			}
			settle(0)
			return
		}
		m.Nack()
		if reason := m.Metadata.Get(metaTerminate); reason != "" {
			if terr := jm.TermWithReason(reason); terr != nil {
				s.log.Warn("terminate failed; the server redelivers it no more than its limit", "subject", jm.Subject(), "err", terr)
			}
			settle(0)
			return
		}
		settle(s.handBack(jm, s.spec.backoff(int(meta.NumDelivered)), ordered))
	})
}

// handleSafely is handle with a panic turned into an error (the handler chain recovers its
// handler's own panics; this catches one in the wrapping around it): the message is handed back
// for redelivery and, past its limit, dead-lettered, and the worker lives on.
func (s *subscriber) handleSafely(m *message.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic around a handler", "subject", m.Metadata.Get(MetaSubject), "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic around the handler: %v", p)
		}
	}()
	return s.handle(m)
}

// handBack gives a message whose handler failed back to JetStream, to be redelivered after
// backoff, and returns how soon it will be redelivered.
//
// An ordered message stays with this worker, kept in progress, through its backoff (or until the
// subscriber closes), and is then handed back for redelivery at once. Were JetStream to delay it
// instead, a worker that stopped meanwhile would leave it to come back after the later messages
// of its key: they are handed back at once on a graceful stop, and on a crash their ack wait runs
// out first.
func (s *subscriber) handBack(jm jetstream.Msg, backoff time.Duration, ordered bool) time.Duration {
	if !ordered {
		if err := jm.NakWithDelay(backoff); err != nil {
			return s.spec.AckWait // redelivered once its ack wait runs out
		}
		return backoff
	}
	t := time.NewTimer(backoff)
	select {
	case <-t.C:
	case <-s.closing:
		t.Stop()
	}
	if err := jm.Nak(); err != nil {
		return s.spec.AckWait
	}
	return time.Millisecond // at once: the key waits for it two ack waits more
}

func toMessage(jm jetstream.Msg, meta *jetstream.MsgMetadata, maxDeliver int) *message.Message {
	id := jm.Headers().Get(events.HeaderMsgID)
	if id == "" {
		id = meta.Stream + ":" + strconv.FormatUint(meta.Sequence.Stream, 10)
	}
	m := message.NewMessage(id, jm.Data())
	for k, v := range jm.Headers() {
		if len(v) > 0 && k != events.HeaderMsgID {
			m.Metadata.Set(k, v[0])
		}
	}
	m.Metadata.Set(MetaSubject, jm.Subject())
	m.Metadata.Set(MetaStream, meta.Stream)
	m.Metadata.Set(MetaSequence, strconv.FormatUint(meta.Sequence.Stream, 10))
	m.Metadata.Set(MetaDeliveries, strconv.FormatUint(meta.NumDelivered, 10))
	m.Metadata.Set(MetaMaxDeliver, strconv.Itoa(maxDeliver))
	return m
}

// Close stops taking new messages and waits (up to the ack wait) for those in flight to settle.
// stopIntake stops taking messages and returns once none is handed to the router any more.
func (s *subscriber) stopIntake() {
	s.closeOnce.Do(func() { close(s.closing) })
	if s.subscribed.Load() {
		<-s.stopped
	}
}

func (s *subscriber) Close() error {
	s.closeSettled()
	return nil
}

func (s *subscriber) waitInflight() { s.inflight.Wait() }

// closeSettled is Close, reporting whether every message in flight settled in time.
func (s *subscriber) closeSettled() bool { return s.closeSettledWithin(s.spec.AckWait) }

// closeSettledWithin is closeSettled waiting up to within for what is in flight.
func (s *subscriber) closeSettledWithin(within time.Duration) bool {
	s.stopIntake() // no message is handed out after this, so inflight only shrinks
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	settled := true
	select {
	case <-done:
	case <-time.After(within):
		settled = false
	}
	s.keepOnce.Do(func() { close(s.keepStop) })
	return settled
}

// Publisher publishes watermill messages to JetStream and returns once JetStream has
// acknowledged every one. The subject is the message's MetaSubject, else the topic; the
// message UUID becomes Nats-Msg-Id.
type Publisher struct {
	js      jetstream.JetStream
	timeout time.Duration
}

// NewPublisher returns a publisher that waits up to timeout (default 10s) for acks.
func NewPublisher(js jetstream.JetStream, timeout time.Duration) *Publisher {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &Publisher{js: js, timeout: timeout}
}

// Publish implements message.Publisher.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	return p.PublishContext(ctx, topic, msgs...)
}

// PublishContext publishes msgs concurrently and waits for every acknowledgement, up to the
// publisher's timeout when ctx has no deadline: an acknowledgement lost with a NATS node never
// resolves an asynchronous publish, and the handler would wait until its hold time ran out.
func (p *Publisher) PublishContext(ctx context.Context, topic string, msgs ...*message.Message) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	if len(msgs) == 1 {
		_, err := p.js.PublishMsg(ctx, toNATS(topic, msgs[0]), jetstream.WithMsgID(msgs[0].UUID))
		return wrapPublish(msgs[0], topic, err)
	}
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	waited := 0 // futures[:waited] are acknowledged
	wait := func() error {
		for ; waited < len(futures); waited++ {
			select {
			case <-futures[waited].Ok():
			case err := <-futures[waited].Err():
				return wrapPublish(msgs[waited], topic, err)
			case <-ctx.Done():
				return wrapPublish(msgs[waited], topic, ctx.Err())
			}
		}
		return nil
	}
	for _, m := range msgs {
		if m.Metadata.Get(MetaAfterPrevious) != "" {
			if err := wait(); err != nil {
				return err
			}
		}
		f, err := p.js.PublishMsgAsync(toNATS(topic, m), jetstream.WithMsgID(m.UUID))
		if err != nil {
			return wrapPublish(m, topic, err)
		}
		futures = append(futures, f)
	}
	return wait()
}

// Close implements message.Publisher; the connection belongs to the caller.
func (p *Publisher) Close() error { return nil }

func toNATS(topic string, m *message.Message) *nats.Msg {
	subject := m.Metadata.Get(MetaSubject)
	if subject == "" {
		subject = topic
	}
	nm := &nats.Msg{Subject: subject, Data: m.Payload, Header: make(nats.Header, len(m.Metadata))}
	for k, v := range m.Metadata {
		if !strings.HasPrefix(k, "_") && k != events.HeaderMsgID {
			nm.Header.Set(k, v)
		}
	}
	return nm
}

func wrapPublish(m *message.Message, topic string, err error) error {
	if err == nil {
		return nil
	}
	subject := m.Metadata.Get(MetaSubject)
	if subject == "" {
		subject = topic
	}
	return fmt.Errorf("publish %s to %s: %w", m.UUID, subject, err)
}
