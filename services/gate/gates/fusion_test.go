package gates_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
	"github.com/worldgate/worldgate/services/graphd/server"
	"github.com/worldgate/worldgate/shared/attest"
	"github.com/worldgate/worldgate/shared/attest/attesttest"
	"github.com/worldgate/worldgate/shared/metrics/metricstest"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// movableClock is the wall clock from the start of an hour, which a test moves forward (past
// a rate window) with skip.
type movableClock struct {
	base, start time.Time
	skipped     atomic.Int64
}

func newMovableClock() *movableClock {
	now := time.Now()
	return &movableClock{base: now.Truncate(time.Hour), start: now}
}

func (c *movableClock) now() time.Time {
	return c.base.Add(time.Since(c.start) + time.Duration(c.skipped.Load()))
}

func (c *movableClock) skip(d time.Duration) { c.skipped.Add(int64(d)) }

// ending is how a proposal left the gates: validated, held, or rejected by a gate with a code,
// and its trail as gate:outcome[:code] (no timings or signatures, which differ run to run).
type ending struct {
	Where string
	Trail []string
}

func endingOf(where string, p *events.Proposal) ending {
	e := ending{Where: where}
	for _, h := range p.Route.Trail {
		e.Trail = append(e.Trail, strings.TrimSuffix(h.Gate+":"+h.Outcome+":"+h.Code, ":"))
	}
	return e
}

// fusionRun is what one process running every gate did with the proposals of
// runFusionScenario: each proposal's ending by scenario name, the messages PROPOSALS stored,
// the messages published into it from outside (emitted proposals and the retry), and the
// process's gate metrics.
type fusionRun struct {
	endings   map[string]ending
	stored    uint64
	published int
	decisions map[string]float64 // gate_decisions_total by label set
	latencies map[string]uint64  // gate_latency_seconds observations by gate
	// signatures are how many hops of each proposal's trail carry a signature, by scenario name
	signatures map[string]int
}

// runFusionScenario runs every gate in one process, fused or not, over the same proposals: a
// valid move (validated), a move to a place without that exit (rejected by the invariant
// gate), flagged ambience (rejected by the safety gate), valid ambience (validated through all
// seven gates), an NPC removal (held for approval), and a second move over the actor's budget
// (refused transiently by the rate gate, then sent back on the rate gate's retry subject once
// the window has passed, and validated).
func runFusionScenario(t *testing.T, fuse bool, opts ...func(*stack)) fusionRun {
	s := newStack(t)
	for _, o := range opts {
		o(s)
	}
	cfg := testConfig()
	cfg.NoFusion = !fuse
	cfg.Rate = gates.RateConfig{Window: time.Minute, Budgets: map[string]gates.Budget{events.KindPlayerMoved: {ActorCount: 1}}}
	clock := newMovableClock()
	deps := s.deps(cfg)
	deps.Now = clock.now
	s.run(t, deps, "all")

	move := func(to, dir string) *events.Proposal {
		return proposal(t, events.KindPlayerMoved, map[string]any{"playerId": "player:ada", "fromLocationId": "loc:square", "toLocationId": to, "direction": dir})
	}
	named := map[string]*events.Proposal{
		"valid move":      move("loc:gate", "north"),
		"invalid move":    move("loc:tower", "west"),
		"flagged":         ambience(t, "loc:square", "The crowd chose to disembowel the bard."),
		"valid ambience":  ambience(t, "loc:square", "Rain drums on the awnings while a cart rattles past the well."),
		"removal":         proposal(t, events.KindNPCRemoved, map[string]any{"npcId": "npc:bram", "reason": "retired"}),
		"over the budget": move("loc:gate", "north"),
	}
	id := map[string]string{}
	for name, p := range named {
		id[p.ProposalID] = name
	}
	published := 0
	publish := func(p *events.Proposal) { s.publish(t, p); published++ }
	ended := func() int {
		return s.count(t, events.StreamProposals, events.SubjectValidatedAll) + s.count(t, events.StreamProposals, events.SubjectRejectedAll) +
			s.count(t, events.StreamProposals, events.SubjectApproval)
	}
	// The valid move spends the actor's budget before the second move comes.
	publish(named["valid move"])
	natstest.WaitFor(t, 15*time.Second, "the valid move to end", func() bool { return ended() == 1 })
	for _, name := range []string{"invalid move", "flagged", "valid ambience", "removal", "over the budget"} {
		publish(named[name])
	}
	refused := s.waitRejected(t, named["over the budget"].ProposalID)
	if refused.Gate != gates.Rate || refused.Code != events.CodeRateLimited || !refused.Transient {
		t.Fatalf("the move over the budget: %+v; want a transient RATE_LIMITED refusal by the rate gate", refused)
	}
	natstest.WaitFor(t, 15*time.Second, "every proposal to end", func() bool { return ended() == len(named) })

	clock.skip(time.Minute) // the window is over: the ai-worker sends the move back
	s.retry(t, refused)
	published++
	natstest.WaitFor(t, 15*time.Second, "the retried move to end", func() bool { return ended() == len(named)+1 })

	run := fusionRun{endings: map[string]ending{}, published: published, decisions: map[string]float64{}, latencies: map[string]uint64{}, signatures: map[string]int{}}
	end := func(pid, where string, p *events.Proposal) {
		run.endings[id[pid]] = endingOf(where, p)
		run.signatures[id[pid]] = 0
		for _, h := range p.Route.Trail {
			if h.Sig != "" {
				run.signatures[id[pid]]++
			}
		}
	}
	for pid, p := range s.proposalsOn(t, events.SubjectValidatedAll) {
		route, _ := route.Default().For(p.Kind)
		if err := s.keys.Ring.Verify(p, route, gates.Approval, gates.Schema); err != nil {
			t.Errorf("validated %s (%s): its trail does not prove its route: %v", pid, id[pid], err)
		}
		end(pid, "validated", p)
	}
	for pid, p := range s.proposalsOn(t, events.SubjectApproval) {
		end(pid, "held", p)
	}
	for pid, r := range s.rejections(t) {
		if _, retried := run.endings[id[pid]]; !retried {
			end(pid, fmt.Sprintf("rejected by %s: %s", r.Gate, r.Code), r.Proposal)
		}
	}
	// Every hop an audit record holds verifies against the public keys alone, with the record's
	// digest: the audit gate gets the run so far signed.
	for _, m := range s.messages(t, events.StreamAudit, events.SubjectAuditProposals) {
		var rec gates.AuditRecord
		if err := json.Unmarshal(m.Data(), &rec); err != nil {
			t.Fatal(err)
		}
		p := &events.Proposal{ProposalID: rec.ProposalID, Route: events.Route{Trail: rec.Trail}}
		for i := range rec.Trail {
			if err := s.keys.Ring.CheckHop(p, rec.Digest, i); err != nil {
				t.Errorf("audit record of %s: hop %d: %v", id[rec.ProposalID], i, err)
			}
		}
	}
	// Every decision verifies, whatever signature covers it (what worldgate trace shows).
	for pid, p := range s.proposalsOn(t, events.SubjectApproval) {
		digest, _ := attest.Digest(p)
		for i := range p.Route.Trail {
			if err := s.keys.Ring.CheckHop(p, digest, i); err != nil {
				t.Errorf("held %s: hop %d: %v", id[pid], i, err)
			}
		}
	}
	if n := s.count(t, events.StreamDLQ, ""); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	info, err := s.nats.JS.Stream(context.Background(), events.StreamProposals)
	if err != nil {
		t.Fatal(err)
	}
	run.stored = info.CachedInfo().State.Msgs
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			switch mf.GetName() {
			case "worldgate_gate_decisions_total":
				run.decisions[strings.Join(labels, ",")] = m.GetCounter().GetValue()
			case "worldgate_gate_latency_seconds":
				run.latencies[strings.Join(labels, ",")] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	return run
}

// TestFusedGatesDecideAsUnfused runs the same proposals through every gate in one process,
// fused and unfused: the endings, trails (gate, outcome, code, in order), signatures and gate
// metrics are the same, and fused, each proposal that enters the process leaves it in one
// message, where unfused every gate's decision is a message of its own.
// fusionWant is how each proposal of runFusionScenario ends, whatever the process's layout.
var fusionWant = map[string]ending{
	"valid move":      {"validated", []string{"schema:passed", "invariant:passed", "rate:passed", "audit:passed"}},
	"invalid move":    {"rejected by invariant: INVARIANT_VIOLATION", []string{"schema:passed", "invariant:rejected:INVARIANT_VIOLATION"}},
	"flagged":         {"rejected by safety: SAFETY_FLAGGED", []string{"schema:passed", "safety:rejected:SAFETY_FLAGGED"}},
	"valid ambience":  {"validated", []string{"schema:passed", "safety:passed", "invariant:passed", "dedup:passed", "replay:passed", "rate:passed", "audit:passed"}},
	"removal":         {"held", []string{"schema:passed", "invariant:passed", "approval:held"}},
	"over the budget": {"validated", []string{"schema:passed", "invariant:passed", "rate:rejected:RATE_LIMITED", "rate:passed", "audit:passed"}},
}

func TestFusedGatesDecideAsUnfused(t *testing.T) {
	fused, unfused := runFusionScenario(t, true), runFusionScenario(t, false)
	want := fusionWant
	for name, run := range map[string]fusionRun{"fused": fused, "unfused": unfused} {
		for _, p := range slices.Sorted(maps.Keys(want)) {
			if got := run.endings[p]; got.Where != want[p].Where || !slices.Equal(got.Trail, want[p].Trail) {
				t.Errorf("%s, %s: %s %v; want %s %v", name, p, got.Where, got.Trail, want[p].Where, want[p].Trail)
			}
		}
		if len(run.endings) != len(want) {
			t.Errorf("%s: endings %v", name, run.endings)
		}
	}
	if !maps.Equal(fused.decisions, unfused.decisions) {
		t.Errorf("gate_decisions_total fused %v; unfused %v", fused.decisions, unfused.decisions)
	}
	if !maps.Equal(fused.latencies, unfused.latencies) || len(fused.latencies) != len(gates.Builtin().Known()) {
		t.Errorf("gate_latency_seconds observations fused %v; unfused %v", fused.latencies, unfused.latencies)
	}
	// Unfused, PROPOSALS stores what came in and every decision (each a hop); fused, what came
	// in and one message per run.
	hops := 0
	for _, e := range want {
		hops += len(e.Trail)
	}
	if int(unfused.stored) != unfused.published+hops {
		t.Errorf("unfused: PROPOSALS stored %d messages; want %d in and %d decisions", unfused.stored, unfused.published, hops)
	}
	if int(fused.stored) != 2*fused.published {
		t.Errorf("fused: PROPOSALS stored %d messages; want %d in and one out per message in", fused.stored, fused.published)
	}
	t.Logf("PROPOSALS messages for the same %d proposals: fused %d, unfused %d", len(want), fused.stored, unfused.stored)
	for name, run := range map[string]fusionRun{"fused": fused, "unfused": unfused} {
		for p, e := range want {
			if run.signatures[p] != len(e.Trail) {
				t.Errorf("%s with a key per gate, %s: %d signed hops of %d; want every hop signed", name, p, run.signatures[p], len(e.Trail))
			}
		}
	}
}

// TestFusedRunWithOneKeyIsSignedOnce runs the scenario in a process whose gates share one key
// (attest.GenerateShared): the same endings, every validated trail proves its route and every
// audit record's hops verify (checked in runFusionScenario: the audit gate got the run so far
// signed), and each run of the process leaves it signed once, where with a key per gate each
// decision is; unfused, each decision leaves the process and is signed on its own.
func TestFusedRunWithOneKeyIsSignedOnce(t *testing.T) {
	shareKey := func(s *stack) { s.keys = attesttest.NewShared() }
	fused, unfused := runFusionScenario(t, true, shareKey), runFusionScenario(t, false, shareKey)
	for _, p := range slices.Sorted(maps.Keys(fusionWant)) {
		want := fusionWant[p]
		if got := fused.endings[p]; got.Where != want.Where || !slices.Equal(got.Trail, want.Trail) {
			t.Errorf("%s: %s %v; want %s %v", p, got.Where, got.Trail, want.Where, want.Trail)
		}
		runs := 1
		if p == "over the budget" {
			runs = 2 // refused by the rate gate, then sent back to it
		}
		if fused.signatures[p] != runs {
			t.Errorf("fused, %s: %d signed hops of %d; want one per run (%d)", p, fused.signatures[p], len(want.Trail), runs)
		}
		if unfused.signatures[p] != len(want.Trail) {
			t.Errorf("unfused, %s: %d signed hops of %d; want every hop signed", p, unfused.signatures[p], len(want.Trail))
		}
	}
}

// TestFusedRunDeliveredTwicePublishesOnce delivers the same proposal twice to a process that
// runs every gate fused (a redelivery after a crash before the acknowledgement): both runs
// pass all seven gates, and PROPOSALS keeps one validated message, under the id of the run's
// first gate, and AUDIT one record.
func TestFusedRunDeliveredTwicePublishesOnce(t *testing.T) {
	s := newStack(t)
	deps := s.deps(testConfig())
	deps.Now = hourClock()
	s.run(t, deps, "all")
	p := ambience(t, "loc:square", "Lanterns sway above the square as the evening bell rings twice.")
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		s.publishRaw(t, events.EmitSubject(p.AgentRole), fmt.Sprintf("%s:delivery-%d", p.ProposalID, i), data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := s.nats.JS.Consumer(ctx, events.StreamProposals, gates.Durable(gates.Schema))
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 15*time.Second, "both deliveries decided and acknowledged", func() bool {
		info, err := c.Info(ctx)
		return err == nil && info.AckFloor.Stream >= 2 && info.NumAckPending == 0 && info.NumPending == 0
	})
	if got := metricstest.Sum(t, s.reg, "worldgate_gate_decisions_total", map[string]string{"gate": gates.Audit, "outcome": "passed"}); got != 2 {
		t.Fatalf("the audit gate decided %v times; want 2 (once per delivery)", got)
	}
	stream, err := s.nats.JS.Stream(ctx, events.StreamProposals)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.count(t, events.StreamProposals, events.SubjectValidatedAll); n != 1 {
		t.Fatalf("%d validated messages; want 1", n)
	}
	last, err := stream.GetLastMsgForSubject(ctx, events.SubjectValidatedAll)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := last.Header.Get(events.HeaderMsgID), p.ProposalID+":0:schema"; got != want {
		t.Fatalf("validated message id %q; want %q (the run's first gate's)", got, want)
	}
	if n := s.count(t, events.StreamProposals, ""); n != 3 {
		t.Fatalf("PROPOSALS holds %d messages; want the 2 deliveries and 1 outcome", n)
	}
	if n := s.count(t, events.StreamAudit, ""); n != 1 {
		t.Fatalf("AUDIT holds %d records; want 1", n)
	}
}

// BenchmarkMoveThroughGates is a move proposal through schema → invariant → rate → audit, every
// gate in one process, on the embedded stack: fused (one hop) and unfused (four), for
// comparison with benchstat. It reports moves/s and PROPOSALS messages per move.
func BenchmarkMoveThroughGates(b *testing.B) {
	for _, fuse := range []bool{true, false} {
		name := map[bool]string{true: "fused", false: "unfused"}[fuse]
		b.Run(name, func(b *testing.B) {
			s := newStack(b)
			cfg := testConfig()
			cfg.NoFusion = !fuse
			deps := s.deps(cfg)
			deps.Now = hourClock()
			s.run(b, deps, gates.Schema, gates.Invariant, gates.Rate, gates.Audit)
			moves := make([][]byte, b.N)
			for i := range moves {
				p := proposal(b, events.KindPlayerMoved, map[string]any{"playerId": "player:ada", "fromLocationId": "loc:square", "toLocationId": "loc:gate", "direction": "north"})
				data, err := json.Marshal(p)
				if err != nil {
					b.Fatal(err)
				}
				moves[i] = data
			}
			subject := events.EmitSubject("world-rules")
			ctx := context.Background()
			b.ResetTimer()
			for i, data := range moves {
				if _, err := s.nats.JS.PublishAsync(subject, data, jetstream.WithMsgID(fmt.Sprintf("move-%d", i))); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-s.nats.JS.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("moves not stored within a minute")
			}
			natstest.WaitFor(b, 5*time.Minute, "every move validated", func() bool {
				return s.count(b, events.StreamProposals, events.SubjectValidatedAll) >= b.N
			})
			b.StopTimer()
			if n := s.count(b, events.StreamProposals, events.SubjectRejectedAll) + s.count(b, events.StreamDLQ, ""); n != 0 {
				b.Fatalf("%d moves rejected or dead-lettered", n)
			}
			info, err := s.nats.JS.Stream(ctx, events.StreamProposals)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "moves/s")
			b.ReportMetric(float64(info.CachedInfo().State.Msgs)/float64(b.N), "msgs/move")
		})
	}
}

// A fused run that fails part-way (graphd is down when the invariant gate reads the player) is
// redelivered and decided again from its first gate: each gate's decision is still counted
// once, when the run finally publishes, as it would be unfused.
func TestFusedRunFailingPartWayCountsEachDecisionOnce(t *testing.T) {
	s := newStack(t)
	cfg := testConfig()
	cfg.MaxDeliver, cfg.Backoff = 50, []time.Duration{200 * time.Millisecond}
	deps := s.deps(cfg)
	deps.Now = hourClock()
	s.run(t, deps, gates.Schema, gates.Invariant, gates.Rate, gates.Audit)
	ctx := context.Background()
	addr := s.graph.Addr()
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.graph.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	p := proposal(t, events.KindPlayerMoved, map[string]any{"playerId": "player:ada", "fromLocationId": "loc:square", "toLocationId": "loc:gate", "direction": "north"})
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	s.publishRaw(t, events.EmitSubject("world-rules"), p.ProposalID, data)
	c, err := s.nats.JS.Consumer(ctx, events.StreamProposals, gates.Durable(gates.Schema))
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 20*time.Second, "the run redelivered after failing at the invariant gate", func() bool {
		info, err := c.Info(ctx)
		return err == nil && info.NumRedelivered > 0 && info.Delivered.Consumer >= 3
	})
	// graphd back on the same address, with the same world from its first answer: seeded in a
	// data directory first (on another address), or a delivery in between would find no player.
	dir := t.TempDir()
	seeded := graphdtest.Start(t, graphdtest.WithDataDir(dir))
	seedWorld(t, graphdtest.Writer(t, seeded.URL()))
	closeSeeded, cancelSeeded := context.WithTimeout(ctx, 5*time.Second)
	defer cancelSeeded()
	if err := seeded.Close(closeSeeded); err != nil {
		t.Fatal(err)
	}
	graphdtest.Start(t, graphdtest.WithDataDir(dir), graphdtest.WithConfig(func(c *server.Config) { c.Listen = addr }))
	natstest.WaitFor(t, 30*time.Second, "the move validated once graphd is back", func() bool {
		return s.count(t, events.StreamProposals, events.SubjectValidatedAll) == 1
	})
	for _, gate := range []string{gates.Schema, gates.Invariant, gates.Rate, gates.Audit} {
		if got := metricstest.Sum(t, s.reg, "worldgate_gate_decisions_total", map[string]string{"gate": gate, "outcome": "passed"}); got != 1 {
			t.Errorf("the %s gate's pass counted %v times; want 1", gate, got)
		}
	}
}
