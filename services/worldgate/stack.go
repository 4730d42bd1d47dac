package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/worldgate/stack"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
)

// devStack is the stack `worldgate dev` runs (package stack: stack.Dev and the demo world),
// with the dev command's own views of it (the demo, the feed, the live status line).
type devStack struct {
	*stack.Stack
	f      devFlags
	unlock func() // releases the data directory, after everything in it is closed
}

// devParts is what `worldgate dev` runs, in order: edge, the pipeline, then the demo world.
func devParts() []stack.Part { return append(stack.Dev(), demoWorld) }

func startStack(ctx context.Context, f devFlags, log *slog.Logger) (_ *devStack, err error) {
	st := &devStack{f: f}
	if !f.dataDirLocked {
		if st.unlock, err = lockDataDir(f.dataDir); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				st.unlock()
			}
		}()
	}
	if len(f.approvers) == 0 {
		f.approvers = []string{defaultApprover()}
	}
	if err := checkDevPorts(f); err != nil {
		return nil, err
	}
	gcfg := devGateConfig()
	st.Stack, err = stack.Start(ctx, stack.Config{
		DataDir: f.dataDir, Host: f.host,
		NATSPort: f.natsPort, GraphPort: f.graphPort, AdminPort: f.adminPort, MCPPort: f.mcpPort, EdgePort: f.edgePort,
		SyncAlways: f.syncAlways, MCPNoAuth: f.mcpNoAuth, Approvers: f.approvers,
		LLMConfig: f.llmConfig, Budgets: f.budgets, DefaultBudgets: devBudgets,
		Gates: &gcfg, Logger: log,
	}, devParts())
	if err != nil {
		return nil, err
	}
	return st, nil
}

// stop stops the stack, then releases the data directory.
func (st *devStack) stop() {
	if st.Stack != nil {
		st.Stack.Stop()
	}
	if st.unlock != nil {
		st.unlock()
		st.unlock = nil
	}
}

// defaultApprover is the approver `worldgate dev` creates when -approvers is not given: the
// login name, made into an approver name, or "dev".
func defaultApprover() string {
	var b strings.Builder
	for _, r := range strings.ToLower(currentUser()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	if name := b.String(); natsauth.CheckApprover(name) == nil {
		return name
	}
	return "dev"
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Summary is what one demo run did, counted from the streams (and, for AI usage, from this
// process's metrics).
type Summary struct {
	Events          int            `json:"events"`
	Proposals       int            `json:"proposals"`
	ProposalsByKind map[string]int `json:"proposalsByKind"`
	Committed       int            `json:"committed"`
	Rejected        map[string]int `json:"rejected"`
	DeadLetters     int            `json:"deadLetters"`
	Tokens          int            `json:"tokens"`
	CostUSD         float64        `json:"costUsd"`
	CacheHits       int            `json:"cacheHits"`
	// InputRailBlocked counts player utterances the input rail refused before any model call.
	InputRailBlocked int `json:"inputRailBlocked"`
	// Outcomes counts the final decisions by kind (committed, fallback, refused).
	Outcomes map[string]int `json:"outcomes"`
}

// tally counts what a run did, from each stream's last sequence when the run started, so it
// counts only this run's messages even though the data directory keeps earlier ones. Each
// update reads only the messages that arrived since the previous one.
type tally struct {
	st   *devStack
	next map[string]uint64 // per stream: the last sequence already counted
	sum  Summary
	seen map[string]bool // proposal ids already counted
}

var tallyStreams = []string{events.StreamWorld, events.StreamProposals, events.StreamCommitted, events.StreamDLQ, events.StreamOutcomes}

func (st *devStack) newTally(ctx context.Context) (*tally, error) {
	t := &tally{st: st, next: map[string]uint64{}, seen: map[string]bool{},
		sum: Summary{ProposalsByKind: map[string]int{}, Rejected: map[string]int{}, Outcomes: map[string]int{}}}
	for _, name := range tallyStreams {
		s, err := st.JS.Stream(ctx, name)
		if err != nil {
			return nil, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return nil, err
		}
		t.next[name] = info.State.LastSeq
	}
	return t, nil
}

// scan calls fn for every message of stream after what was already counted, and returns how
// many there were. With a nil fn it only counts.
func (t *tally) scan(ctx context.Context, stream string, fn func(subject string, data []byte)) (int, error) {
	s, err := t.st.JS.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	from, last := t.next[stream], info.State.LastSeq
	if last <= from {
		return 0, nil
	}
	if fn == nil {
		t.next[stream] = last
		return int(last - from), nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from + 1})
	if err != nil {
		return 0, err
	}
	n := 0
	for t.next[stream] < last {
		batch, err := c.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return n, err
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			if meta, err := msg.Metadata(); err == nil {
				t.next[stream] = meta.Sequence.Stream
			}
			n++
			fn(msg.Subject(), msg.Data())
		}
		if got == 0 {
			break
		}
	}
	return n, nil
}

// update brings the summary up to date and returns a copy of it.
func (t *tally) update(ctx context.Context) (*Summary, error) {
	s := &t.sum
	for stream, total := range map[string]*int{events.StreamWorld: &s.Events, events.StreamCommitted: &s.Committed, events.StreamDLQ: &s.DeadLetters} {
		n, err := t.scan(ctx, stream, nil)
		if err != nil {
			return nil, err
		}
		*total += n
	}
	_, err := t.scan(ctx, events.StreamProposals, func(subject string, data []byte) {
		switch {
		case strings.HasPrefix(subject, "proposals.rejected."):
			s.Rejected[strings.TrimPrefix(subject, "proposals.rejected.")]++
		case strings.HasPrefix(subject, "proposals.gate."):
			var p struct{ ProposalID, Kind string }
			if json.Unmarshal(data, &p) == nil && p.ProposalID != "" && !t.seen[p.ProposalID] {
				t.seen[p.ProposalID] = true
				s.Proposals++
				s.ProposalsByKind[p.Kind]++
			}
		}
	})
	if err != nil {
		return nil, err
	}
	_, err = t.scan(ctx, events.StreamOutcomes, func(subject string, _ []byte) {
		// world.outcomes.<kind>.<actor>
		if parts := strings.SplitN(subject, ".", 4); len(parts) == 4 {
			s.Outcomes[parts[2]]++
		}
	})
	if err != nil {
		return nil, err
	}
	reg := t.st.Reg
	s.Tokens = int(sumMetric(reg, "worldgate_ai_tokens_total", "type", "prompt", "completion"))
	s.CostUSD = sumMetric(reg, "worldgate_ai_cost_usd_total", "")
	s.CacheHits = int(sumMetric(reg, "worldgate_ai_cache_hits_total", ""))
	s.InputRailBlocked = int(sumMetric(reg, "worldgate_ai_input_rail_total", "outcome", "blocked"))
	out := *s
	out.ProposalsByKind = maps.Clone(s.ProposalsByKind)
	out.Rejected = maps.Clone(s.Rejected)
	out.Outcomes = maps.Clone(s.Outcomes)
	return &out, nil
}

// sumMetric adds up every series of a counter, or only those whose label has one of values.
func sumMetric(g prometheus.Gatherer, name, label string, values ...string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" {
				ok := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == label && slices.Contains(values, lp.GetValue()) {
						ok = true
					}
				}
				if !ok {
					continue
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// liveStatus keeps one status line up to date until ctx ends.
func (st *devStack) liveStatus(ctx context.Context, t *tally, out *termOut) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	w, tty := out.w, out.tty
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := t.update(sctx)
		cancel()
		if err != nil {
			continue
		}
		rejected := 0
		for _, n := range s.Rejected {
			rejected += n
		}
		line := fmt.Sprintf("events %d · proposals %d · committed %d · rejected %d · dead letters %d · tokens %d · $%.4f",
			s.Events, s.Proposals, s.Committed, rejected, s.DeadLetters, s.Tokens, s.CostUSD)
		out.mu.Lock()
		switch {
		case tty:
			fmt.Fprint(w, "\r\033[K"+line)
		case line != last:
			// Not a terminal (a log, a pipe): one line per change, not one per second.
			fmt.Fprintln(w, line)
		}
		out.mu.Unlock()
		last = line
	}
}

func discardUnless(quiet bool) io.Writer {
	if quiet {
		return io.Discard
	}
	return os.Stderr
}
