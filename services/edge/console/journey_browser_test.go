package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/edge/console"
	"github.com/worldgate/worldgate/services/edge/edge"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// A reload brings back many outcomes at once, each of several attempts: the console asks edge
// for each one's journey, and a key over its rate is answered 429. The console waits as edge
// says and asks again, so every journey still shows its attempts and the request's totals.
func TestConsoleJourneysWaitOutTheKeysRate(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: `apt-get install -y chromium` (.ci/run does it)")
	}
	n := natstest.Start(t)
	k := edge.PlayerKey("play-console", consoleKey, "player:ana")
	k.Rate, k.Burst = 1, 1
	ring, err := edge.NewKeyring([]edge.Key{k})
	if err != nil {
		t.Fatal(err)
	}
	s, err := edge.New(edge.Config{JetStream: n.JS, Keys: ring, Extra: console.Routes(console.Config{Key: consoleKey, Player: "player:ana",
		Start:    func(context.Context) (string, error) { return "loc:tavern", nil },
		Location: func(context.Context, string) (any, error) { return map[string]string{"name": "The Tavern"}, nil }})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Shutdown(); srv.Close() })

	// Three lines, each refused once by the safety gate, then answered by fallback content.
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		env, err := events.NewEnvelope(events.PlayerSpokeToNPC, "play-console", events.Actor{Kind: "player", ID: "player:ana"},
			events.PlayerSpokeToNPCPayload{PlayerID: "player:ana", NPCID: "npc:oren", LocationID: "loc:tavern", Utterance: "Any news?"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := events.Publish(ctx, n.JS, env); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, env.EventID)
		now := time.Now()
		payload := json.RawMessage(`{"npcId":"npc:oren","playerId":"player:ana","locationId":"loc:tavern","line":"Not now, friend.","intent":"greet"}`)
		p := func(attempt int, fallback string, tokens int, hops ...events.Hop) *events.Proposal {
			return &events.Proposal{ProposalID: fmt.Sprintf("p-%d-%d", i, attempt), Kind: events.KindNPCDialogue, CorrelationID: env.CorrelationID,
				CausationID: env.EventID, AgentRole: "npc-dialogue", Actor: env.Actor, Attempt: attempt, Payload: payload,
				Provenance: &events.Provenance{Model: "scripted-small", Tokens: events.Tokens{Prompt: tokens, Completion: 10}, Fallback: fallback},
				Route:      events.Route{Trail: hops}}
		}
		refused := p(0, "", 100, events.Hop{Gate: "safety", Outcome: "rejected", Code: string(events.CodeSafetyFlagged), At: now})
		rb, _ := json.Marshal(events.Rejection{ProposalID: refused.ProposalID, Kind: refused.Kind, Gate: "safety", Code: events.CodeSafetyFlagged,
			Reason: "unsafe", CorrelationID: env.CorrelationID, AgentRole: "npc-dialogue", RejectedUTC: now, Proposal: refused})
		if _, err := n.JS.Publish(ctx, events.RejectedSubject("safety"), rb); err != nil {
			t.Fatal(err)
		}
		fb := p(1, "refused; last by the safety gate", 0, events.Hop{Gate: "safety", Outcome: "passed", At: now})
		o := events.CommittedOutcome(fb, events.DomainEvent{EventID: fmt.Sprintf("0190a8f0-0000-5000-8000-%012d", i), Type: "NPCDialogueAccepted",
			ProposalID: fb.ProposalID, Kind: fb.Kind, CorrelationID: env.CorrelationID, OccurredUTC: now, CommittedUTC: now, Payload: payload})
		ob, _ := o.Encode()
		if _, err := n.JS.Publish(ctx, o.Subject(), ob); err != nil {
			t.Fatal(err)
		}
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	bctx, cancel = context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()
	if _, err := chromedp.Run(bctx, chromedp.Navigate(srv.URL+"/play/")); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		js := fmt.Sprintf(`(document.getElementById("j-%s") || {}).textContent || ""`, id)
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(got, "whole request: 2 attempts · tokens 100+20") && strings.Contains(got, "safety rejected SAFETY_FLAGGED") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the journey of %s reads %q; want both attempts and the request's totals", id, got)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
