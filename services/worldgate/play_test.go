package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/worldgate/worldgate/shared/slowtest"
)

// The /play console in a real headless Chromium (Debian's chromium; .ci/run installs it): a
// refused move shows its gate and reason, a move through an exit button arrives, and a line
// said to an NPC gets the NPC's committed answer, with its journey in the side panel. The
// player's words contain markup: they are shown literally, never parsed.
//
// WORLDGATE_SCREENSHOT=docs/img/play-console.png (relative to services/worldgate: ../../docs/…)
// also saves a screenshot of the console at the end.
func TestPlayConsoleInABrowser(t *testing.T) {
	slowtest.Skip(t, "end-to-end (the /play console in headless chromium on the dev stack)")
	ctx := openBrowser(t, 1280, 900)
	st := startQuietStack(t)

	run := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := chromedp.Run(ctx, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	waitText := func(what, sel, want string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !strings.Contains(text(sel), want) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %q never appeared in %s; it shows %q", what, want, sel, text(sel))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	run("open /play", chromedp.Navigate(st.EdgeURL+"/play/"))
	run("exits shown", chromedp.WaitVisible(chromedp.CSS(`button[data-direction="north"]`)))
	waitText("start", "#loc-name", "The Ash Gate")
	waitText("live", "#status", "live")

	// A move the world does not allow, sent the way the exit buttons send theirs.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`publish("Player.MoveRequested", {playerId: state.player, fromLocationId: state.location, direction: "west"}, "move west"), null`)); err != nil {
		t.Fatal(err)
	}
	waitText("refused move", "#feed", "world-rules refused: loc:ash-gate has no exit west")
	waitText("refusal's journey", "#journey-list", "MOVE_REFUSED")

	// Walk north through the exit button.
	run("click north", chromedp.Click(chromedp.CSS(`button[data-direction="north"]`)))
	waitText("arrival", "#loc-name", "Cinder Market")
	waitText("move committed", "#feed", "You go north.")

	// Talk to Sefa, with markup in the words.
	words := `<img src=x onerror="document.title='pwned'"> Any <b>news</b>?`
	run("Sefa shown", chromedp.WaitVisible(chromedp.CSS(`button[data-npc="npc:sefa"]`)))
	run("choose Sefa", chromedp.Click(chromedp.CSS(`button[data-npc="npc:sefa"]`)))
	run("type", chromedp.SendKeys(chromedp.CSS(`#utterance`), words))
	run("say", chromedp.Click(chromedp.CSS(`#say`)))
	waitText("the player's words, literally", "#feed", "You: "+words)
	npcName := text(`button[data-npc="npc:sefa"]`)
	waitText("the NPC's line", "#feed", npcName+": “")
	waitText("the line's journey", "#journey-list", "schema passed")
	markup, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#feed img, #feed b, #journey-list img, #journey-list b").length`))
	if err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if markup != 0 || title == "pwned" {
		t.Fatalf("markup in the player's words became elements (%d) or ran (title %q)", markup, title)
	}
	if path := os.Getenv("WORLDGATE_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
