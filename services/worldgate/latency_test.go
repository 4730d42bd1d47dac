package main

import (
	"bytes"
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/worldgate/worldgate/events"
)

// BenchmarkEventToSSEOutcome is latency as a game sees it: from POST /v1/events to the
// event's outcome received by an SSE client of edge, on worldgate dev's whole stack (scripted
// provider), for accepted moves (world-rules, no model) and NPC dialogue (the LLM route).
// Reports p50 and p99 in ms; one request at a time. Run:
//
//	go test -run '^$' -bench EventToSSEOutcome -benchtime 12x ./worldgate
func BenchmarkEventToSSEOutcome(b *testing.B) {
	st := startQuietStack(b)
	ctx := context.Background()
	req, _ := http.NewRequestWithContext(ctx, "GET", st.EdgeURL+"/v1/outcomes", nil)
	req.Header.Set("Authorization", "Bearer "+st.EdgeKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("SSE: %v %v", err, resp)
	}
	defer resp.Body.Close()
	next, stop := iter.Pull2(iter.Seq2[sse.Event, error](sse.Read(resp.Body, nil)))
	defer stop()
	post := func(env *events.Envelope) {
		body, _ := json.Marshal(env)
		r, _ := http.NewRequestWithContext(ctx, "POST", st.EdgeURL+"/v1/events", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+st.EdgeKey)
		r.Header.Set("Content-Type", "application/json")
		pr, err := http.DefaultClient.Do(r)
		if err != nil || pr.StatusCode != http.StatusAccepted {
			b.Fatalf("POST: %v %v", err, pr)
		}
		pr.Body.Close()
	}
	await := func(id string) {
		for {
			ev, err, ok := next()
			if !ok || err != nil {
				b.Fatalf("stream ended: %v", err)
			}
			var o struct{ EventID, Kind string }
			if json.Unmarshal([]byte(ev.Data), &o) == nil && o.EventID == id {
				if o.Kind == string(events.OutcomeRefused) {
					b.Fatalf("refused: %s", ev.Data)
				}
				return
			}
		}
	}
	measure := func(b *testing.B, mk func(i int) *events.Envelope) {
		var lat []time.Duration
		i := 0
		for b.Loop() {
			env := mk(i)
			i++
			start := time.Now()
			post(env)
			await(env.EventID)
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
	}
	b.Run("move", func(b *testing.B) {
		// Back and forth between the market (where bram starts) and the ash gate.
		measure(b, func(i int) *events.Envelope {
			from, dir := "loc:market", "south"
			if i%2 == 1 {
				from, dir = "loc:ash-gate", "north"
			}
			return envelope(b, events.PlayerMoveRequested, "player:bram", events.PlayerMoveRequestedPayload{PlayerID: "player:bram", FromLocationID: from, Direction: dir})
		})
	})
	b.Run("dialogue", func(b *testing.B) {
		// Three players in turn (dev's rate gate allows each 4 lines per 10 s: run at most
		// -benchtime=12x), each to an NPC where it stands, new words every time (no cache hit).
		talks := []events.PlayerSpokeToNPCPayload{
			{PlayerID: "player:cass", NPCID: "npc:oren", LocationID: "loc:tavern"},
			{PlayerID: "player:ana", NPCID: "npc:mara", LocationID: "loc:ash-gate"},
			{PlayerID: "player:bram", NPCID: "npc:sefa", LocationID: "loc:market"},
		}
		measure(b, func(i int) *events.Envelope {
			p := talks[i%len(talks)]
			p.Utterance = "Tell me something new, number " + strconv.Itoa(i) + "?"
			return envelope(b, events.PlayerSpokeToNPC, p.PlayerID, p)
		})
	})
}
