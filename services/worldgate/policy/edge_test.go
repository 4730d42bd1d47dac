package policy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/edge/edge"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/slowtest"
)

// Edge, as its own NATS user, tells a retry from another envelope under a used idempotency
// key: it may read back the first event by its sequence (and nothing else of WORLD), so the
// conflict is a 409 naming that event, not a 503.
func TestEdgeReadsBackAReusedIdempotencyKey(t *testing.T) {
	s := startServer(t)
	_, js := s.connect(natsauth.Edge)
	ring, err := edge.NewKeyring([]edge.Key{{Name: "game", Secret: "game-secret-000000000", Scopes: []string{edge.ScopePublish}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := edge.New(edge.Config{JetStream: js, Keys: ring})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Shutdown(); hs.Close() })
	post := func(env *events.Envelope) (int, string) {
		b, _ := json.Marshal(env)
		req, _ := http.NewRequest("POST", hs.URL+"/v1/events", strings.NewReader(string(b)))
		req.Header.Set("Authorization", "Bearer game-secret-000000000")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	envelope := func() *events.Envelope {
		env, err := events.NewEnvelope(events.PlayerMoved, "test", events.Actor{Kind: "player", ID: "player:ada"},
			events.PlayerMovedPayload{PlayerID: "player:ada", FromLocationID: "loc:a", ToLocationID: "loc:b", Direction: "north"})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	first := envelope()
	for i, want := range []string{`"duplicate":false`, `"duplicate":true`} {
		if code, body := post(first); code != 202 || !strings.Contains(body, want) || !strings.Contains(body, first.EventID) {
			t.Fatalf("publish %d: %d %s", i, code, body)
		}
	}
	other := envelope()
	other.IdempotencyKey = first.IdempotencyKey
	if code, body := post(other); code != 409 || !strings.Contains(body, "first used for event "+first.EventID) {
		t.Fatalf("another envelope under a used key: %d %s", code, body)
	}
}

// For an event's journey edge reads the refusals on PROPOSALS, and only them: an ordered
// consumer filtered to proposals.rejected.> is allowed, one on the proposals in flight (a
// gate's subject, the validated ones) or on the whole stream is not.
func TestEdgeReadsOnlyRefusalsOfProposals(t *testing.T) {
	slowtest.Skip(t, "slow (each refused consumer waits out its request's timeout)")
	s := startServer(t)
	_, js := s.connect(natsauth.Edge)
	ctx := t.Context()
	st, err := js.Stream(ctx, events.StreamProposals)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectRejectedAll}}); err != nil {
		t.Fatalf("edge reading the refusals: %v", err)
	}
	for _, filter := range [][]string{{events.GateSubject("schema")}, {"proposals.validated.>"}, nil} {
		if _, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: filter}); err == nil {
			t.Errorf("edge read PROPOSALS filtered to %q; want it refused", filter)
		}
	}
}
