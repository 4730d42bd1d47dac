package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/worldgate/worldgate/shared/slowtest"
)

// The /play console's journey of a request tells every attempt, not only the final one (issue 40:
// "tokens and cost cover only the final attempt"; "a fallback's gate chips all say passed"):
// a line said to an NPC who is not there is refused by the invariant gate at every attempt (the
// reprompts, then the fallback content), and the journey shows each attempt with the gate that
// refused it, and what the whole request spent — the sums worldgate trace reads from the
// streams. Edge reads the refusals as its own NATS user, as under worldgate dev.
func TestPlayConsoleShowsEveryAttempt(t *testing.T) {
	slowtest.Skip(t, "end-to-end (the /play console in headless chromium on the dev stack)")
	ctx := openBrowser(t, 1280, 900)
	st := startQuietStack(t)
	eval := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return s
	}
	waitFor := func(what, js, want string) string {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		got := eval(js)
		for ; !strings.Contains(got, want); got = eval(js) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %q never appeared; %s is %q", what, want, js, got)
			}
			time.Sleep(200 * time.Millisecond)
		}
		return got
	}
	if _, err := chromedp.Run(ctx, chromedp.Navigate(st.EdgeURL+"/play/")); err != nil {
		t.Fatal(err)
	}
	waitFor("live", `document.getElementById("status").textContent`, "live")
	waitFor("the start", `state.location`, "loc:")
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`publish("Player.SpokeToNPC", {playerId: state.player, npcId: "npc:ghost", locationId: state.location, utterance: "Hello? Is anyone there?"}, "say to the ghost"), null`)); err != nil {
		t.Fatal(err)
	}
	id := eval(`Array.from(state.pending.keys()).pop()`)
	li := fmt.Sprintf(`(document.getElementById("j-%s") || {}).textContent || ""`, id)
	shown := waitFor("the request's attempts", li, "whole request:")

	// What the streams say (the console's events carry their id as correlation id).
	j, err := findJourney(ctx, st.JS, id, time.Now().Add(-time.Hour))
	if err != nil || j == nil {
		t.Fatalf("trace of %s: %v", id, err)
	}
	if len(j.Proposals) < 2 {
		t.Fatalf("the streams hold %d attempts for %s; want reprompts or a fallback", len(j.Proposals), id)
	}
	last := j.Proposals[len(j.Proposals)-1]
	if last.Tokens == j.Tokens {
		t.Fatalf("the final attempt spent what the request did (%+v): the test cannot tell them apart", j.Tokens)
	}
	want := fmt.Sprintf("whole request: %d attempts · tokens %d+%d · $%.6f", len(j.Proposals), j.Tokens.Prompt, j.Tokens.Completion, j.CostUSD)
	if !strings.Contains(shown, want) {
		t.Errorf("the journey reads %q; want %q", shown, want)
	}
	for _, p := range j.Proposals {
		r := p.Rejections[len(p.Rejections)-1]
		chip := fmt.Sprintf("%s rejected %s", r.Gate, r.Code)
		if !strings.Contains(shown, fmt.Sprintf("attempt %d", p.Attempt)) || !strings.Contains(shown, chip) {
			t.Errorf("the journey reads %q; want attempt %d refused by %q", shown, p.Attempt, chip)
		}
	}
	if !strings.Contains(shown, "(fallback content)") {
		t.Errorf("the journey reads %q; want the fallback content's attempt named", shown)
	}
	// The refused outcome's last proposal was the fallback content: the reprompts are the
	// model's answers after its first, not that proposal's attempt number.
	answers := 0
	for _, p := range j.Proposals {
		if p.Fallback == "" {
			answers++
		}
	}
	if wantRp := fmt.Sprintf("reprompts: %d", answers-1); answers > 1 && !strings.Contains(shown, wantRp) {
		t.Errorf("the journey reads %q; want %q", shown, wantRp)
	}
}
