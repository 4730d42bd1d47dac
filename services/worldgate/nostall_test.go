package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/slowtest"
)

// spokeEnvelope is a valid-looking Player.SpokeToNPC envelope whose utterance pads it to
// exactly size bytes (as a buggy game backend would send).
func spokeEnvelope(t *testing.T, size int) []byte {
	t.Helper()
	env := map[string]any{
		"specVersion": "1.0", "eventId": uuid.Must(uuid.NewV7()).String(), "type": events.PlayerSpokeToNPC,
		"occurredUtc": time.Now().UTC().Format(time.RFC3339), "source": "test/buggy-backend",
		"actor": map[string]string{"kind": "player", "id": "player:ada"}, "correlationId": "c-" + uuid.NewString(),
		"idempotencyKey": uuid.NewString(),
		"payload":        map[string]string{"playerId": "player:ada", "npcId": "npc:brannoc", "locationId": "loc:tavern", "utterance": ""},
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	pad := size - len(b)
	if pad < 0 {
		t.Fatalf("size %d is below the envelope's own %d bytes", size, len(b))
	}
	return []byte(strings.Replace(string(b), `"utterance":""`, `"utterance":"`+strings.Repeat("a", pad)+`"`, 1))
}

// Issue 24: on the embedded stack, published with the publisher's own credentials, an
// envelope of 1 MiB (as large as WORLD takes with its headers) and one of 1 MiB − 1 KiB are
// each dead-lettered with a reason, and envelopes on subjects of no known event type are
// refused at once; the demo then runs to the end, and no message reaches its consumer's
// delivery limit on the server (JetStream's max-deliveries advisory never fires).
func TestNothingStallsThePipeline(t *testing.T) {
	slowtest.Skip(t, "end-to-end (the dev stack: 1 MiB envelopes, then the whole demo)")
	dir := t.TempDir()
	logOut, err := os.Create(filepath.Join(dir, "test.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logOut.Close()
	ctx := context.Background()
	f := devFlags{dataDir: filepath.Join(dir, "data"), host: "127.0.0.1", noDemo: true, idleTimeout: 60 * time.Second}
	if err := os.MkdirAll(f.dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := startStack(ctx, f, logx.New(logOut, "worldgate-dev", "info"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()

	var maxDeliveries atomic.Int64
	adv, err := st.Conn.Subscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>", func(m *nats.Msg) {
		maxDeliveries.Add(1)
		t.Logf("max deliveries reached: %s", m.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := adv.Unsubscribe(); err != nil {
			t.Error(err)
		}
	}()

	_, js, err := st.ConnectAs(natsauth.Publisher)
	if err != nil {
		t.Fatal(err)
	}
	dlqBefore := natstest.StreamMsgs(t, st.JS, events.StreamDLQ, "")
	// WORLD takes 1 MiB, headers included: the largest envelope it stores leaves room for the
	// Nats-Msg-Id header.
	big := []int{1<<20 - 128, 1<<20 - 1<<10}
	var bigIDs []string
	for _, size := range big {
		body := spokeEnvelope(t, size)
		msg := &nats.Msg{Subject: events.Subject(events.PlayerSpokeToNPC), Data: body, Header: nats.Header{}}
		id := uuid.NewString()
		msg.Header.Set(events.HeaderMsgID, id)
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatalf("publish a %d-byte envelope: %v", size, err)
		}
		bigIDs = append(bigIDs, fmt.Sprint(ack.Sequence))
	}

	// Subjects of no known event type: refused at once, nothing stored.
	worldBefore := natstest.StreamMsgs(t, st.JS, events.StreamWorld, "")
	accepted := 0
	for i := range 100 {
		subject := "world.events.zzz"
		if i%2 == 1 {
			subject = events.Subject(events.PlayerSpokeToNPC) + ".extra"
		}
		_, err := js.Publish(ctx, subject, spokeEnvelope(t, 600))
		if !errors.Is(err, jetstream.ErrNoStreamResponse) {
			accepted++
			if accepted == 1 {
				t.Errorf("publish to %s: got %v, want a refusal (no stream takes this subject)", subject, err)
			}
		}
	}
	if n := natstest.StreamMsgs(t, st.JS, events.StreamWorld, ""); n != worldBefore || accepted > 0 {
		t.Errorf("%d of 100 publishes on unknown subjects accepted; WORLD stored %d of them", accepted, n-worldBefore)
	}

	idle, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := st.WaitIdle(idle); err != nil {
		t.Fatalf("after the oversized envelopes: %v", err)
	}
	// Each big envelope is dead-lettered (by every consumer that reads its subject), with a
	// reason, a bounded excerpt and where it came from.
	dls := readDeadLetters(t, st.JS, dlqBefore)
	for _, seq := range bigIDs {
		found := false
		for _, dl := range dls {
			if dl.Header.Get(events.HeaderDLQStream) != events.StreamWorld || dl.Header.Get(events.HeaderDLQSequence) != seq {
				continue
			}
			found = true
			if dl.Header.Get(events.HeaderDLQReason) == "" || dl.Header.Get(events.HeaderDLQSubject) != events.Subject(events.PlayerSpokeToNPC) {
				t.Errorf("dead letter of WORLD:%s lacks its reason or subject: %v", seq, dl.Header)
			}
			if len(dl.Data) >= 1<<19 {
				t.Errorf("dead letter of WORLD:%s carries %d bytes of body, want a bounded excerpt", seq, len(dl.Data))
			}
		}
		if !found {
			t.Errorf("no dead letter for WORLD:%s", seq)
		}
	}

	n, err := st.runDemo(ctx)
	if err != nil {
		t.Fatalf("demo after the oversized envelopes: %v", err)
	}
	idle2, cancel2 := context.WithTimeout(ctx, 60*time.Second)
	defer cancel2()
	if err := st.WaitIdle(idle2); err != nil {
		t.Fatalf("the demo (%d events) did not finish: %v", n, err)
	}
	checkConsumerLimits(t, st.JS)
	_ = st.Conn.Flush()
	if got := maxDeliveries.Load(); got != 0 {
		t.Errorf("%d messages reached their consumer's delivery limit on the server", got)
	}
}

// readDeadLetters returns the DLQ's messages after sequence from.
func readDeadLetters(t *testing.T, js jetstream.JetStream, from uint64) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, events.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := from + 1; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// checkConsumerLimits: every durable consumer of the running stack has a bounded delivery
// limit on the server with room for the dead letter (natsx.CheckConsumer), and the topology
// it runs on has limits that agree (natsx.CheckLimits).
func checkConsumerLimits(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx := context.Background()
	if err := natsx.CheckLimits(natsx.DefaultTopology(natsx.TopologyOptions{}), natsx.ServerMaxPayload); err != nil {
		t.Error(err)
	}
	for _, name := range []string{events.StreamWorld, events.StreamProposals, events.StreamCommitted, events.StreamAudit, events.StreamDLQ, events.StreamOutcomes} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		l := s.ListConsumers(ctx)
		for info := range l.Info() {
			if info.Config.AckPolicy == jetstream.AckNonePolicy {
				continue // an ordered reader (summary, trace): it never redelivers
			}
			if err := natsx.CheckConsumer(info.Config); err != nil {
				t.Errorf("on %s: %v", name, err)
			}
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Issue 24: a second `worldgate dev` on a data directory in use fails at once, naming the
// directory and the holder's PID, before it opens anything in it; the first keeps working on
// an untouched store.
func TestSecondDevOnTheSameDataDirFailsFast(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "data")
	logPath := filepath.Join(tmp, "first.log")
	logOut, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logOut.Close()
	ctx := context.Background()
	st, err := startStack(ctx, devFlags{dataDir: dir, host: "127.0.0.1", noDemo: true}, logx.New(logOut, "worldgate-dev", "info"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	before := natstest.StreamMsgs(t, st.JS, events.StreamCommitted, "")

	var stdout, stderr strings.Builder
	start := time.Now()
	err = runDev(ctx, []string{"-data-dir", dir, "-demo-only", "-json", "-nats-port", "0", "-graph-port", "0", "-admin-port", "0", "-mcp-port", "0", "-edge-port", "0"}, &stdout, &stderr)
	took := time.Since(start)
	want := fmt.Sprintf("data directory %s is in use by another worldgate (pid %d)", dir, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second dev on %s: got %v, want an error containing %q", dir, err, want)
	}
	if took > 5*time.Second {
		t.Errorf("the second dev took %v to fail, want at once", took)
	}
	// It opened nothing in the directory: not even its log.
	if _, err := os.Stat(filepath.Join(dir, "worldgate.log")); !os.IsNotExist(err) {
		t.Errorf("the second dev wrote its log into the data directory in use (%v)", err)
	}
	// The first still works on its store: a new event is committed.
	_, js, err := st.ConnectAs(natsauth.Publisher)
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.NewEnvelope(events.PlayerMoveRequested, "test", events.Actor{Kind: "player", ID: "player:ana"},
		events.PlayerMoveRequestedPayload{PlayerID: "player:ana", FromLocationID: "loc:ash-gate", Direction: "north"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.Publish(ctx, js, env); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 30*time.Second, "the move to be committed", func() bool {
		return natstest.StreamMsgs(t, st.JS, events.StreamCommitted, "") > before
	})
	st.stop()
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "will rebuild") || strings.Contains(string(log), "outdated") {
		t.Errorf("the first instance's store was disturbed:\n%s", log)
	}
}

// A start-up error is returned as an error, not hidden by a panic of the clean-up.
func TestStartUpErrorIsAnError(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	_, err = startStack(context.Background(), devFlags{dataDir: t.TempDir(), host: "127.0.0.1", noDemo: true, graphPort: port}, logx.Discard())
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Fatalf("start with the graph port taken: got %v, want an error naming port %d", err, port)
	}
}

// MCP servers without tokens are for this machine only.
func TestMCPNoAuthOnlyOnLoopback(t *testing.T) {
	var out bytes.Buffer
	err := runDev(context.Background(), []string{"-data-dir", t.TempDir(), "-host", "0.0.0.0", "-mcp-no-auth"}, &out, &out)
	if err == nil || !strings.Contains(out.String(), "loopback") {
		t.Fatalf("-mcp-no-auth on 0.0.0.0: %v\n%s", err, out.String())
	}
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "0.0.0.0": false, "10.0.0.5": false, "example.org": false} {
		if isLoopback(host) != want {
			t.Errorf("isLoopback(%q) = %v", host, !want)
		}
	}
}
