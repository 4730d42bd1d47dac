package runtime

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/natsx"
)

// Partitioned spreads a consumer over the partitions of its stream, so that its replicas share
// the work and still keep each order key's messages in stream order across replicas: the
// stream stores each message on a partition chosen from its order key (a subject transform),
// each partition has its own durable consumer (<Durable>-p<NN>), and each partition is consumed
// by exactly one replica at a time.
//
// Two mechanisms, one for balance and one for safety:
//   - Membership (balance): every replica puts a key in the natsx.BucketMembers bucket each
//     second (<Durable>.<member id>); the keys of the members that stopped vanish after
//     natsx.MembersTTL. Each replica watches the members' keys (memberView), sorts them, and
//     consumes the partitions p with p mod members = its place. A replica that no longer owns a partition pauses its
//     consumer (no deliveries to anyone), stops taking its messages, lets those it holds settle
//     however long a handler takes (a key's queued messages are handed back in stream order),
//     unpins the consumer and resumes it, so that the next owner starts with them, never before.
//   - Pinning (safety): each partition's consumer has a priority group with the pinned_client
//     policy (NATS ADR-42): the server delivers its messages to one client at a time and moves
//     the pin only when that client unpins or sends no pull request for the pin TTL (the
//     consumer's AckWait). Two replicas that disagree about the members for a moment cannot both
//     receive a partition's messages.
//
// A replica that takes over a partition whose messages another one still holds (a crash) takes
// none until they can be redelivered, then takes them first, in stream order (as for any ordered
// consumer at start; see Consumer.OrderKey).
type Partitioned struct {
	// Count returns the number of partitions of the stream (it is the server's: read at start).
	Count func(ctx context.Context, js jetstream.JetStream) (int, error)
	// Filter is partition p's filter subject.
	Filter func(p int) string
	// Legacy, if set, are subjects the consumer's own durable (Consumer.Durable) still reads, as
	// one more partition: what was published before the stream was partitioned.
	Legacy []string
}

// priorityGroup is the priority group of every partition consumer.
const priorityGroup = "partition"

// heartbeatEvery is how often a member renews its key (natsx.MembersTTL is the key's life).
const heartbeatEvery = time.Second

// partitionGroup is the intake of a partitioned consumer: the partitions this replica owns, each
// a subscriber of its own.
type partitionGroup struct {
	js   jetstream.JetStream
	spec Consumer
	log  *slog.Logger
	m    *handlerMetrics
	name string

	handle func(*message.Message) error
	run    func(func())

	member  string // this replica's key in the members bucket
	kv      jetstream.KeyValue
	view    *memberView // the members, from a watch of their keys
	units   int         // partitions, plus one for the legacy subjects
	closing chan struct{}
	ctx     context.Context // cancelled on closing
	cancel  context.CancelFunc
	loops   sync.WaitGroup // the membership loop and one goroutine per unit
	wants   []chan bool    // per unit: whether this replica should own it now (latest wins)

	mu   sync.Mutex
	subs map[int]*subscriber // the units this replica consumes now

	stopOnce sync.Once
	resumes  []func() // the partitions paused while this replica stops
}

func newPartitionGroup(js jetstream.JetStream, spec Consumer, log *slog.Logger, m *handlerMetrics, name string) *partitionGroup {
	return &partitionGroup{js: js, spec: spec, log: log, m: m, name: name, closing: make(chan struct{}), subs: map[int]*subscriber{}}
}

// unitSpec is the consumer of unit u: a partition's own durable, or the legacy durable.
func (g *partitionGroup) unitSpec(u int) Consumer {
	c := g.spec
	c.Partitioned = nil
	c.group = priorityGroup
	if u == g.units-1 && len(g.spec.Partitioned.Legacy) > 0 {
		c.Subjects = g.spec.Partitioned.Legacy
		return c
	}
	c.Durable = PartitionDurable(g.spec.Durable, u)
	c.Subjects = []string{g.spec.Partitioned.Filter(u)}
	return c
}

// PartitionDurable is the durable consumer of partition p of the partitioned consumer durable.
func PartitionDurable(durable string, p int) string { return fmt.Sprintf("%s-p%02d", durable, p) }

func (g *partitionGroup) start(ctx context.Context, handle func(*message.Message) error, run func(func())) error {
	g.handle, g.run = handle, run
	g.ctx, g.cancel = context.WithCancel(context.Background())
	var n int
	err := natsx.Await(ctx, "the partitions of "+g.spec.Stream, g.log, func(ctx context.Context) (err error) {
		n, err = g.spec.Partitioned.Count(ctx, g.js)
		return err
	})
	if err != nil {
		return err
	}
	g.units = n
	if len(g.spec.Partitioned.Legacy) > 0 {
		g.units++
	}
	if err := natsx.Await(ctx, "bucket "+natsx.BucketMembers, g.log, func(ctx context.Context) (err error) {
		g.kv, err = g.js.KeyValue(ctx, natsx.BucketMembers)
		return err
	}); err != nil {
		return err
	}
	g.member = g.spec.Durable + "." + rand.Text()
	if err := g.beat(ctx); err != nil {
		return fmt.Errorf("join the replicas of %s: %w", g.spec.Durable, err)
	}
	g.wants = make([]chan bool, g.units)
	for u := range g.units {
		g.wants[u] = make(chan bool, 1)
		g.loops.Add(1)
		go g.unit(u)
	}
	g.view = newMemberView()
	g.loops.Add(2)
	go g.watchMembers()
	go g.membership()
	g.log.Info("consuming partitions", "consumer", g.spec.Durable, "partitions", n, "member", g.member)
	return nil
}

func (g *partitionGroup) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := g.kv.PutString(ctx, g.member, time.Now().UTC().Format(time.RFC3339Nano))
	return err
}

// watchMembers keeps g.view from a watch of the members' keys (see memberView), watching again
// when a watch ends or cannot start.
func (g *partitionGroup) watchMembers() {
	defer g.loops.Done()
	for {
		w, err := g.kv.WatchFiltered(g.ctx, []string{g.spec.Durable + ".*"}, jetstream.MetaOnly())
		switch {
		case err == nil:
			g.follow(w)
			_ = w.Stop()
			g.view.restart()
		case g.ctx.Err() == nil:
			g.log.Warn("could not watch the members; partitions unchanged until it can", "consumer", g.spec.Durable, "err", err)
		}
		select {
		case <-g.closing:
			return
		case <-time.After(heartbeatEvery):
		}
	}
}

// follow applies w's updates to g.view until w ends or the group closes.
func (g *partitionGroup) follow(w jetstream.KeyWatcher) {
	for {
		select {
		case <-g.closing:
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			g.view.apply(e)
		}
	}
}

// membership renews this replica's key and shares the units among the members, every second.
func (g *partitionGroup) membership() {
	defer g.loops.Done()
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	var last []string
	g.view.awaitReady(g.closing, heartbeatEvery) // the first sharing waits for the watch's first reading
	for {
		if err := g.beat(g.ctx); err != nil && g.ctx.Err() == nil {
			g.log.Warn("could not renew this replica's membership", "consumer", g.spec.Durable, "err", err)
		}
		ms, err := g.view.live(g.member, natsx.MembersTTL)
		switch {
		case errors.Is(err, errMembersPending):
			// A watch (re)starting: the partitions stay as they are until it has read the members.
		case err != nil && g.ctx.Err() == nil:
			// The partitions stay as they are: pinning keeps them exclusive meanwhile.
			g.log.Warn("could not read the members; partitions unchanged", "consumer", g.spec.Durable, "err", err)
		case err == nil:
			if !slices.Equal(ms, last) {
				g.log.Info("replicas changed; sharing the partitions", "consumer", g.spec.Durable, "members", len(ms))
				last = ms
			}
			me := slices.Index(ms, g.member)
			for u, want := range g.wants {
				own := u%len(ms) == me
				select {
				case <-want:
				default:
				}
				want <- own
			}
		}
		select {
		case <-g.closing:
			return
		case <-t.C:
		}
	}
}

// unit takes and gives up unit u as the membership says.
func (g *partitionGroup) unit(u int) {
	defer g.loops.Done()
	for {
		select {
		case <-g.closing:
			return
		case own := <-g.wants[u]:
			g.mu.Lock()
			sub := g.subs[u]
			g.mu.Unlock()
			switch {
			case own && sub == nil:
				g.take(u)
			case !own && sub != nil:
				g.give(u, sub)
			}
		}
	}
}

// take starts consuming unit u.
func (g *partitionGroup) take(u int) {
	spec := g.unitSpec(u)
	sub := newSubscriber(g.js, spec, g.log)
	// Registered before it starts, so that a close meanwhile stops it.
	g.mu.Lock()
	g.subs[u] = sub
	g.mu.Unlock()
	if err := sub.start(g.ctx, g.handle, g.run); err != nil {
		g.mu.Lock()
		delete(g.subs, u)
		g.mu.Unlock()
		if g.ctx.Err() == nil {
			g.log.Warn("could not take a partition; trying again at the next heartbeat", "consumer", spec.Durable, "err", err)
		}
		return
	}
	g.m.partitions.WithLabelValues(g.name).Inc()
	g.log.Info("took a partition", "consumer", spec.Durable)
}

// give stops consuming unit u: its messages held here settle (queued ones are handed back in
// stream order), then the pin is released so that the next owner gets them at once.
func (g *partitionGroup) give(u int, sub *subscriber) {
	// Paused first: once this replica stops asking for messages its pin runs out after an ack
	// wait, and a handler here may take longer than that (a commit waiting on a NATS node that
	// died); the next owner must not take the newer messages of its keys meanwhile.
	resume := g.pause(sub.spec.Durable)
	settled := sub.closeSettledWithin(g.spec.MaxHold + g.spec.AckWait)
	g.mu.Lock()
	delete(g.subs, u)
	g.mu.Unlock()
	g.m.partitions.WithLabelValues(g.name).Dec()
	g.unpin(sub.spec.Durable)
	resume()
	g.log.Info("gave up a partition", "consumer", sub.spec.Durable, "settled", settled)
}

// pause stops durable's deliveries to every replica until resume is called: the pause lasts
// an ack wait and is renewed every third of one, so a replica that dies while it holds one
// leaves the partition paused no longer than its held messages wait for redelivery anyway.
func (g *partitionGroup) pause(durable string) (resume func()) {
	ackWait := g.spec.AckWait
	renew := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := g.js.PauseConsumer(ctx, g.spec.Stream, durable, time.Now().Add(ackWait)); err != nil {
			g.log.Warn("could not pause a partition while its messages settle", "consumer", durable, "err", err)
		}
	}
	renew()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(ackWait/3, 50*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				renew()
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := g.js.ResumeConsumer(ctx, g.spec.Stream, durable); err != nil {
			g.log.Warn("could not resume a partition; its pause runs out within an ack wait", "consumer", durable, "err", err)
		}
	}
}

// unpin releases the pin of durable's priority group (best effort: a pin no client renews
// expires after the consumer's pin TTL anyway).
func (g *partitionGroup) unpin(durable string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := g.js.Stream(ctx, g.spec.Stream)
	if err == nil {
		err = s.UnpinConsumer(ctx, durable, priorityGroup)
	}
	if err != nil && !strings.Contains(err.Error(), "not pinned") {
		g.log.Debug("unpin", "consumer", durable, "err", err)
	}
}

func (g *partitionGroup) current() []*subscriber {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*subscriber, 0, len(g.subs))
	for _, s := range g.subs {
		out = append(out, s)
	}
	return out
}

// stopIntake stops the membership and every partition's intake. The partitions are paused
// first, until Close has let their messages settle (as when one is given up).
func (g *partitionGroup) stopIntake() {
	g.stopOnce.Do(func() {
		close(g.closing)
		if g.cancel != nil {
			g.cancel()
		}
		g.loops.Wait()
		for _, s := range g.current() {
			g.resumes = append(g.resumes, g.pause(s.spec.Durable))
			s.stopIntake()
		}
	})
}

func (g *partitionGroup) waitInflight() {
	for _, s := range g.current() {
		s.inflight.Wait()
	}
}

// Close settles what this replica holds, releases its partitions and leaves the members, so
// that the others take its partitions at once rather than after natsx.MembersTTL.
func (g *partitionGroup) Close() error {
	g.stopIntake()
	subs := g.current()
	for _, s := range subs {
		_ = s.Close()
	}
	for _, s := range subs {
		g.unpin(s.spec.Durable)
	}
	for _, resume := range g.resumes {
		resume()
	}
	if g.kv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = g.kv.Delete(ctx, g.member)
	}
	return nil
}
