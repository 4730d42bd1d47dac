package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/worldgate/evalset"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/slowtest"
)

// worldgate eval -live reads committed dialogue from the COMMITTED stream and lists the stalest
// NPC first: one that told eight players the same line is stale, one that varied is not.
func TestEvalLiveListsTheStalestNPCs(t *testing.T) {
	slowtest.Skip(t, "slow (worldgate eval -live over committed dialogue)")
	e := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	say := func(i int, npc, player, line string) {
		payload, _ := json.Marshal(events.NPCDialoguePayload{NPCID: npc, PlayerID: player, LocationID: "loc:quay", Line: line, Intent: "chat"})
		evt := events.DomainEvent{EventID: fmt.Sprintf("evt-%d", i), Type: "NPCDialogueAccepted", ProposalID: fmt.Sprintf("p-%d", i),
			Kind: events.KindNPCDialogue, CommittedUTC: time.Now().UTC(), Payload: payload}
		body, _ := json.Marshal(evt)
		if _, err := e.JS.Publish(ctx, events.CommittedSubject(evt.Type), body); err != nil {
			t.Fatal(err)
		}
	}
	varied := []string{"Mackerel is cheap today.", "The boats came in heavy.", "A pilot rowed out at midnight.", "Herring, bright as silver!",
		"My brother says the water is too warm.", "Crab for the chapel supper.", "Sold out, come back tomorrow.", "Eels with pepper, the keeper's favourite."}
	for i := range 8 {
		say(2*i, "npc:orla", fmt.Sprintf("player:p%d", i), "Berth four is free until the evening tide.")
		say(2*i+1, "npc:fenn", "player:rook", varied[i])
	}
	say(99, "npc:tam", "player:ines", "Pull, don't yank.") // too few lines to judge
	// Another kind on the stream is not dialogue.
	if _, err := e.JS.Publish(ctx, events.CommittedSubject("AmbienceGenerated"), []byte(`{"eventId":"a","type":"AmbienceGenerated","kind":"ambience","payload":{"locationId":"loc:quay","text":"Gulls.","mood":"calm"}}`)); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := runEval(ctx, []string{"-live", "-json", "-nats-url", e.Server.ClientURL()}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	var got struct {
		Lines      int     `json:"lines"`
		NPCs       int     `json:"npcs"`
		Judged     int     `json:"npcsJudged"`
		StaleShare float64 `json:"staleShare"`
		Stalest    []struct {
			NPC       string  `json:"npcId"`
			Stale     bool    `json:"stale"`
			Variety   float64 `json:"variety"`
			Players   int     `json:"players"`
			TopRepeat int     `json:"mostRepeatedTimes"`
		} `json:"stalest"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got.Lines != 17 || got.NPCs != 3 || got.Judged != 2 || got.StaleShare != 0.5 {
		t.Fatalf("lines %d npcs %d judged %d stale share %v, want 17, 3, 2, 0.5:\n%s", got.Lines, got.NPCs, got.Judged, got.StaleShare, out.String())
	}
	first := got.Stalest[0]
	if first.NPC != "npc:orla" || !first.Stale || first.Players != 8 || first.TopRepeat != 8 {
		t.Fatalf("stalest first: %+v, want npc:orla, stale, 8 players, one line 8 times", first)
	}
	for _, s := range got.Stalest[1:] {
		if s.Stale {
			t.Errorf("%s is listed stale (variety %.3f)", s.NPC, s.Variety)
		}
	}
	// The text form names the stale NPC too.
	out.Reset()
	if err := runEval(ctx, []string{"-live", "-nats-url", e.Server.ClientURL()}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte("npc:orla")) || !bytes.Contains(out.Bytes(), []byte("1 of 2 NPCs")) {
		t.Errorf("text output:\n%s", out.String())
	}
}

// worldgate eval grades the safety gate per moderation set, and the outside-style set per
// language and per category, on both halves, in the JSON and in the table.
func TestEvalReportsModerationPerLanguageAndCategory(t *testing.T) {
	slowtest.Skip(t, "slow (worldgate eval over every labelled set)")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if err := runEval(ctx, []string{"-json"}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	var got struct {
		Halves []struct {
			Half  string `json:"half"`
			Gates []struct {
				Gate   string `json:"gate"`
				Groups []struct {
					Group     string   `json:"group"`
					Cases     int      `json:"cases"`
					Harmful   int      `json:"harmful"`
					Recall    *float64 `json:"recall"`
					Precision *float64 `json:"precision"`
				} `json:"groups"`
			} `json:"gates"`
		} `json:"halves"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	want := []string{"labelled", "outside", "outside lang=en", "outside lang=fr", "outside lang=es", "outside lang=de", "outside lang=pt", "outside lang=it",
		"outside benign", "outside harassment", "outside hate", "outside self_harm", "outside threat"}
	if len(got.Halves) != 2 {
		t.Fatalf("%d halves: %s", len(got.Halves), out.String())
	}
	for _, h := range got.Halves {
		groups := map[string]bool{}
		for _, g := range h.Gates {
			for _, gr := range g.Groups {
				if g.Gate != "safety" {
					t.Errorf("%s half: the %s gate has group %s", h.Half, g.Gate, gr.Group)
				}
				if gr.Cases == 0 || gr.Precision == nil || (gr.Harmful > 0) != (gr.Recall != nil) {
					t.Errorf("%s half, %s: %+v", h.Half, gr.Group, gr)
				}
				groups[gr.Group] = true
			}
		}
		for _, w := range want {
			if !groups[w] {
				t.Errorf("%s half: no %q among %v", h.Half, w, groups)
			}
		}
	}
	out.Reset()
	if err := runEval(ctx, nil, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	for _, w := range []string{"[outside lang=de]", "[outside threat]", "[labelled]"} {
		if !bytes.Contains(out.Bytes(), []byte(w)) {
			t.Errorf("the table has no %s row:\n%s", w, out.String())
		}
	}
}

// worldgate eval -fresh grades the gates on the frozen fresh set, apart from the older set
// (issue 41 item 5): one "fresh" half with the three gates, the set's hash beside it.
func TestEvalFresh(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if err := runEval(ctx, []string{"-fresh", "-json"}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	var got struct {
		Fresh  evalset.HalfScore `json:"fresh"`
		SHA256 string            `json:"sha256"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Fresh.Half != evalset.FreshHalf || got.Fresh.Cases != 243 || len(got.Fresh.Gates) != 3 || got.SHA256 != evalset.FreshSHA256 {
		t.Fatalf("eval -fresh: %+v", got)
	}
	if err := runEval(ctx, []string{"-fresh", "-misses"}, &out, &errb); err == nil {
		t.Fatal("-fresh -misses was accepted: the fresh set's misses are not for tuning")
	}
}
