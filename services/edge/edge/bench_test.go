package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
)

// BenchmarkPublish is edge's overhead per request: one envelope published and acknowledged by
// JetStream directly (events.Publish) and through POST /v1/events (HTTP, key, rate limit,
// strict decoding, publish, answer), on the same embedded server. The difference is edge's.
func BenchmarkPublish(b *testing.B) {
	e := start(b, nil)
	mk := func() *events.Envelope {
		env, err := events.NewEnvelope(events.PlayerMoveRequested, "bench", events.Actor{Kind: "player", ID: "player:ada"},
			events.PlayerMoveRequestedPayload{PlayerID: "player:ada", FromLocationID: "loc:a", Direction: "north"})
		if err != nil {
			b.Fatal(err)
		}
		return env
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if _, err := events.Publish(context.Background(), e.nats.JS, mk()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("edge", func(b *testing.B) {
		client := &http.Client{}
		for b.Loop() {
			body, _ := json.Marshal(mk())
			req, _ := http.NewRequest("POST", e.srv.URL+"/v1/events", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+allKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != 202 {
				b.Fatalf("%v %v", err, resp)
			}
			resp.Body.Close()
		}
	})
}
