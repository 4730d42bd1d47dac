package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/worldgate/worldgate/events"
)

// termOut serialises what the terminal shows: the live status line (rewritten in place on a
// terminal) and the feed of outcomes above it.
type termOut struct {
	mu  sync.Mutex
	w   io.Writer
	tty bool
}

// line prints one feed line above the status line.
func (t *termOut) line(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tty {
		fmt.Fprint(t.w, "\r\033[K")
	}
	fmt.Fprintln(t.w, s)
}

// feed prints every outcome as it is decided, compactly: who said what where, which gate
// refused what and why.
func (st *devStack) feed(ctx context.Context, out *termOut) {
	w, err := events.Watch(ctx, st.JS, events.WatchOptions{})
	if err != nil {
		st.Log.Warn("the terminal feed of outcomes cannot start", "err", err)
		return
	}
	defer w.Close()
	for {
		d, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		out.line(feedLine(d.Outcome))
	}
}

// feedLine is one outcome in a line of at most 160 characters.
func feedLine(o *events.Outcome) string {
	var s string
	switch {
	case o.Kind == events.OutcomeRefused && o.Refusal != nil:
		s = fmt.Sprintf("  ✗ %s  %s refused %s (%s): %s", o.Actor.ID, o.Refusal.Gate, cmpOr(o.ProposalKind, "the request"), o.Refusal.Code, o.Refusal.Reason)
	case o.Kind == events.OutcomeSkipped && o.Skip != nil:
		s = fmt.Sprintf("  · %s  %s skipped (%s): %s", o.Actor.ID, cmpOr(o.AgentRole, "a role"), o.Skip.Code, o.Skip.Reason)
	case o.Kind == events.OutcomeReused && o.Reuse != nil:
		s = fmt.Sprintf("  ↺ %s  %s answered with accepted content (%s): %s", o.Actor.ID, cmpOr(o.ProposalKind, "the request"), o.Reuse.ProposalID, o.Text())
	case o.Event == nil:
		s = fmt.Sprintf("  %s  %s", o.Kind, o.Actor.ID)
	default:
		var p map[string]any
		_ = json.Unmarshal(o.Event.Payload, &p)
		str := func(k string) string { v, _ := p[k].(string); return v }
		switch o.Event.Type {
		case "NPCDialogueAccepted":
			s = fmt.Sprintf("  %s  %s → %s: “%s”", str("locationId"), str("npcId"), str("playerId"), str("line"))
		case "AmbienceGenerated":
			s = fmt.Sprintf("  %s  ambience (%s): %s", str("locationId"), str("mood"), str("text"))
		case "QuestSeeded":
			s = fmt.Sprintf("  %s  quest for %s: %s — %s", str("locationId"), o.Actor.ID, str("title"), str("hook"))
		case "PlayerMoved":
			s = fmt.Sprintf("  %s moved %s: %s → %s", str("playerId"), str("direction"), str("fromLocationId"), str("toLocationId"))
		default:
			s = fmt.Sprintf("  %s  %s", o.Event.Type, o.Actor.ID)
		}
		if o.Kind == events.OutcomeFallback {
			s += "  [fallback: " + o.FallbackReason + "]"
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > 160 {
		s = string([]rune(s)[:159]) + "…"
	}
	return "  " + s
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
