package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/event-processor/processor"
	"github.com/worldgate/worldgate/services/worldgate/evalset"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/textstats"
)

func init() {
	commands["eval"] = command{"grade the invariant, dedup and safety gates on the labelled evaluation set (precision and recall per gate and category, both halves; the safety gate also per moderation set, and the outside-style set per language and category)", runEval}
}

// runEval runs the gates' own rules on the labelled set (services/worldgate/evalset) with real parts
// started in this process, prints the scores of both halves, and exits 1 when a gate is below
// its bar. -misses prints the tuning half's wrong verdicts, never the held-out half's.
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the scores (and with -misses the misses) as JSON")
	misses := fs.Bool("misses", false, "also list the tuning half's wrong verdicts (for tuning a rule; the held-out half is never listed)")
	fresh := fs.Bool("fresh", false, "instead of the set: grade the gates on the frozen fresh set (evalset/fresh.jsonl, written from evalset/LABELLING.md, never tuned on), reported apart; no bar, no misses listed")
	live := fs.Bool("live", false, "instead of the set: list the stalest NPCs from the committed dialogue of the running system (COMMITTED stream)")
	since := fs.Duration("since", time.Hour, "-live: read the dialogue committed this long ago or later")
	top := fs.Int("top", 10, "-live: list this many NPCs, stalest first")
	var n natsFlags
	n.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New("usage: worldgate eval [-json] [-misses] | worldgate eval -fresh [-json] | worldgate eval -live [-since 1h] [-top 10] [-json]")
	}
	if *fresh {
		if *misses || *live {
			return errors.New("-fresh takes neither -misses (the fresh set is never tuned on, so its misses are not listed) nor -live")
		}
		return runEvalFresh(ctx, *asJSON, stdout)
	}
	if *live {
		if *since <= 0 || *top <= 0 {
			return errors.New("-since and -top must be positive")
		}
		return runEvalLive(ctx, n, *since, *top, *asJSON, stdout)
	}
	set, err := evalset.Load()
	if err != nil {
		return err
	}
	vs, err := evalset.Run(ctx, set, evalset.Options{})
	if err != nil {
		return err
	}
	scores := evalset.Score(vs)
	var wrong []evalMiss
	if *misses {
		for _, v := range vs {
			if !v.Case.HeldOut && !v.Right() {
				wrong = append(wrong, evalMiss{Verdict: v, Category: v.Case.Category, Expect: v.Case.Expect, Note: v.Case.Note})
			}
		}
	}
	below := evalset.BelowBar(scores)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Halves   []evalset.HalfScore `json:"halves"`
			BelowBar []string            `json:"belowBar"`
			Misses   []evalMiss          `json:"misses,omitempty"`
		}{scores, below, wrong}); err != nil {
			return err
		}
	} else {
		if err := evalset.Print(stdout, scores); err != nil {
			return err
		}
		if *misses {
			fmt.Fprintf(stdout, "tuning half: %d wrong verdicts\n", len(wrong))
			for _, m := range wrong {
				fmt.Fprintf(stdout, "%s %s/%s: want %s, got %s %v %s\n", m.ID, m.Gate, m.Category, m.Expect, m.Outcome, m.For, m.Reason)
			}
		}
	}
	if len(below) > 0 {
		if !*asJSON {
			fmt.Fprintln(stderr, "below the bar:\n  "+strings.Join(below, "\n  "))
		}
		return exitError{1}
	}
	return nil
}

// runEvalFresh grades the gates on the frozen fresh set (issue 41 item 5) and prints its scores
// apart from the older set's. It has no bar: evalset's TestFreshSet keeps floors instead.
func runEvalFresh(ctx context.Context, asJSON bool, stdout io.Writer) error {
	set, err := evalset.LoadFresh()
	if err != nil {
		return err
	}
	vs, err := evalset.Run(ctx, set, evalset.Options{})
	if err != nil {
		return err
	}
	score := evalset.ScoreFresh(vs)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Fresh  evalset.HalfScore `json:"fresh"`
			SHA256 string            `json:"sha256"`
		}{score, evalset.FreshSHA256})
	}
	return evalset.Print(stdout, []evalset.HalfScore{score})
}

// evalMiss is a wrong verdict of the tuning half.
type evalMiss struct {
	evalset.Verdict
	Category string `json:"category"`
	Expect   string `json:"expect"`
	Note     string `json:"note,omitempty"`
}

// staleNPC is one NPC's recent committed dialogue, judged as the event-processor judges it
// (worldgate_npc_stale_ratio): the variety (textstats.Variety) of its last lines.
type staleNPC struct {
	NPC       string   `json:"npcId"`
	Lines     int      `json:"lines"`   // committed in the period
	Judged    int      `json:"judged"`  // the last lines the variety is over
	Variety   float64  `json:"variety"` // distinct-2 (distinct-1 for one-word lines)
	Stale     bool     `json:"stale"`
	Players   int      `json:"players"`
	TopLine   string   `json:"mostRepeatedLine"`
	TopRepeat int      `json:"mostRepeatedTimes"`
	recent    []string // oldest first
}

// runEvalLive reads the dialogue committed since the given time from the COMMITTED stream and
// lists the stalest NPCs first.
func runEvalLive(ctx context.Context, n natsFlags, since time.Duration, top int, asJSON bool, stdout io.Writer) error {
	nc, js, err := natsx.Connect(n.as("worldgate-eval"), logx.Discard())
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg := processor.DefaultDiversity()
	npcs := map[string]*staleNPC{}
	players := map[string]map[string]bool{}
	counts := map[string]map[string]int{}
	subject := events.CommittedSubject(mustDomainType(events.KindNPCDialogue))
	read, err := readCommitted(ctx, js, subject, time.Now().Add(-since), func(evt events.DomainEvent) {
		var p events.NPCDialoguePayload
		if json.Unmarshal(evt.Payload, &p) != nil || p.NPCID == "" {
			return
		}
		s := npcs[p.NPCID]
		if s == nil {
			s = &staleNPC{NPC: p.NPCID}
			npcs[p.NPCID], players[p.NPCID], counts[p.NPCID] = s, map[string]bool{}, map[string]int{}
		}
		s.Lines++
		s.recent = append(s.recent, p.Line)
		if len(s.recent) > cfg.NPCLines {
			s.recent = s.recent[1:]
		}
		players[p.NPCID][p.PlayerID] = true
		counts[p.NPCID][strings.Join(textstats.Words(p.Line), " ")]++
		if c := counts[p.NPCID][strings.Join(textstats.Words(p.Line), " ")]; c > s.TopRepeat {
			s.TopLine, s.TopRepeat = p.Line, c
		}
	})
	if err != nil {
		return err
	}
	list := make([]*staleNPC, 0, len(npcs))
	stale, full := 0, 0
	for id, s := range npcs {
		s.Judged, s.Players = len(s.recent), len(players[id])
		s.Variety = textstats.Variety(s.recent)
		if s.Judged == cfg.NPCLines {
			full++
			if s.Variety < cfg.StaleBelow {
				s.Stale = true
				stale++
			}
		}
		list = append(list, s)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Variety != list[j].Variety {
			return list[i].Variety < list[j].Variety
		}
		if list[i].Lines != list[j].Lines {
			return list[i].Lines > list[j].Lines
		}
		return list[i].NPC < list[j].NPC
	})
	list = list[:min(top, len(list))]
	share := 0.0
	if full > 0 {
		share = float64(stale) / float64(full)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Since      string      `json:"since"`
			Lines      int         `json:"lines"`
			NPCs       int         `json:"npcs"`
			Judged     int         `json:"npcsJudged"`
			Stale      int         `json:"npcsStale"`
			StaleShare float64     `json:"staleShare"`
			Stalest    []*staleNPC `json:"stalest"`
		}{since.String(), read, len(npcs), full, stale, share, list})
	}
	fmt.Fprintf(stdout, "%d lines by %d NPCs committed in the last %s; %d of %d NPCs with %d lines or more are stale (variety < %.2f): %.0f%%\n",
		read, len(npcs), since, stale, full, cfg.NPCLines, cfg.StaleBelow, 100*share)
	if len(list) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NPC\tLINES\tPLAYERS\tVARIETY\tSTALE\tMOST REPEATED LINE")
	for _, s := range list {
		mark := ""
		if s.Stale {
			mark = "stale"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%s\t%dx %q\n", s.NPC, s.Lines, s.Players, s.Variety, mark, s.TopRepeat, s.TopLine)
	}
	return tw.Flush()
}

func mustDomainType(kind string) string {
	info, ok := events.LookupKind(kind)
	if !ok {
		panic("unknown kind " + kind) // a constant of the contract
	}
	return info.DomainType
}

// readCommitted calls fn for each domain event on subject committed at or after start, up to
// the stream's last message when the read began, and returns how many it read.
func readCommitted(ctx context.Context, js jetstream.JetStream, subject string, start time.Time, fn func(events.DomainEvent)) (int, error) {
	s, err := js.Stream(ctx, events.StreamCommitted)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", events.StreamCommitted, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	last := info.State.LastSeq
	if last == 0 {
		return 0, nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject},
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		batch, err := c.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return n, err
		}
		got, done := 0, false
		for msg := range batch.Messages() {
			got++
			var evt events.DomainEvent
			if json.Unmarshal(msg.Data(), &evt) == nil {
				n++
				fn(evt)
			}
			if meta, err := msg.Metadata(); err == nil && meta.Sequence.Stream >= last {
				done = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return n, err
		}
		if got == 0 || done {
			return n, nil
		}
	}
}
