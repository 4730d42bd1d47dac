package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/slowtest"
)

// readmeConnect is the README's Go connect line, verbatim: the test below runs it.
const readmeConnect = `js, closeNATS, err := events.Connect(ctx, events.ConnectOptions{Endpoints: ".worldgate/endpoints.json", Role: "publisher"})`

// The README's Go client works as written against `worldgate dev` (issue 40 item 2): from the
// directory dev ran in, events.Connect with the publisher's credentials of endpoints.json
// publishes the README's event and gets an outcome through Await; a plain connection (no
// inbox prefix) is told why no acknowledgement reaches it instead of a bare timeout.
func TestReadmeGoClientAgainstDev(t *testing.T) {
	slowtest.Skip(t, "end-to-end (the README's Go client against the dev stack)")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), readmeConnect) {
		t.Fatalf("README.md's Go block no longer connects as this test does: %s", readmeConnect)
	}
	root := t.TempDir()
	dataDir := filepath.Join(root, ".worldgate") // worldgate dev's default, relative to where it runs
	logOut, err := os.Create(filepath.Join(root, "worldgate.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logOut.Close() })
	st, err := startStack(context.Background(), devFlags{dataDir: dataDir, host: "127.0.0.1", noDemo: true}, logx.New(logOut, "worldgate-dev", "info"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.stop)
	t.Chdir(root)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, closeNATS, err := events.Connect(ctx, events.ConnectOptions{Endpoints: ".worldgate/endpoints.json", Role: "publisher"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNATS()
	env, err := events.NewEnvelope(events.PlayerMoved, "game-backend/eu-1",
		events.Actor{Kind: "player", ID: "player:ana"}, // the demo world's player, at the Ash Gate
		events.PlayerMovedPayload{PlayerID: "player:ana", FromLocationID: "loc:ash-gate", ToLocationID: "loc:market", Direction: "north"})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := events.Publish(ctx, js, env)
	if err != nil || ack.Duplicate || ack.Stream != "WORLD" {
		t.Fatalf("README's Publish: %v %+v", err, ack)
	}
	talk, err := events.NewEnvelope(events.PlayerSpokeToNPC, "game-backend/eu-1",
		events.Actor{Kind: "player", ID: "player:cass"},
		events.PlayerSpokeToNPCPayload{PlayerID: "player:cass", NPCID: "npc:oren", LocationID: "loc:tavern", Utterance: "Any news?"})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := events.Await(ctx, js, talk)
	if err != nil || len(outs) != 1 || outs[0].EventID != talk.EventID || outs[0].Kind != events.OutcomeCommitted && outs[0].Kind != events.OutcomeFallback || outs[0].Text() == "" {
		t.Fatalf("README's Await: %v %+v", err, outs)
	}
	t.Logf("outcome: %s %q", outs[0].Kind, outs[0].Text())

	// The same user on a plain connection: its inbox is refused, and Publish says so.
	nc, err := nats.Connect(st.NATS.ClientURL(), nats.UserInfo("publisher", st.NATSCredentials("publisher")["password"]),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	plain, _ := jetstream.New(nc)
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	again, _ := events.NewEnvelope(events.PlayerMoved, "game-backend/eu-1", events.Actor{Kind: "player", ID: "player:ana"},
		events.PlayerMovedPayload{PlayerID: "player:ana", FromLocationID: "loc:market", ToLocationID: "loc:ash-gate", Direction: "south"})
	_, err = events.Publish(short, plain, again)
	var unconfirmed *events.UnconfirmedError
	if !errors.As(err, &unconfirmed) || unconfirmed.Inbox == "" || !strings.Contains(err.Error(), "events.Connect") {
		t.Fatalf("plain connection: %v; want an UnconfirmedError naming the refused inbox", err)
	}
}

// lostFirstAck is a JetStream whose first PublishMsg reaches the server but whose
// acknowledgement is lost on the way back.
type lostFirstAck struct {
	jetstream.JetStream
	lost bool
}

func (l *lostFirstAck) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := l.JetStream.PublishMsg(ctx, m, opts...)
	if err == nil && !l.lost {
		l.lost = true
		return nil, context.DeadlineExceeded
	}
	return ack, err
}

// Publish never reports a failure for an event that was stored (issue 40 item 2): when the
// acknowledgement is lost, it confirms with the same Nats-Msg-Id and returns JetStream's
// duplicate acknowledgement; the event is stored once.
func TestPublishConfirmsAStoredEventWhoseAckWasLost(t *testing.T) {
	st := startQuietStack(t)
	_, js, err := st.ConnectAs("publisher")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := envelope(t, events.PlayerMoved, "player:lost", events.PlayerMovedPayload{
		PlayerID: "player:lost", FromLocationID: "loc:north-gate", ToLocationID: "loc:market-square"})
	before := streamMessages(t, st, ctx)
	ack, err := events.Publish(ctx, &lostFirstAck{JetStream: js}, env)
	if err != nil || ack == nil || !ack.Duplicate {
		t.Fatalf("Publish after a lost ack: %v %+v; want the duplicate acknowledgement", err, ack)
	}
	if after := streamMessages(t, st, ctx); after != before+1 {
		t.Fatalf("WORLD holds %d messages, was %d: want the event stored once", after, before)
	}
}

func streamMessages(t *testing.T, st *devStack, ctx context.Context) uint64 {
	t.Helper()
	_, js, err := st.ConnectAs("admin")
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "WORLD")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
