package gates_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/shared/attest/attesttest"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/logx/logxtest"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
)

// Outside testing (chaos, three NATS nodes) saw the gate process exit at start with "retry
// tickets bucket ...: context deadline exceeded" when it was restarted while a NATS leader was
// being elected. A gate process that starts while its cluster has no quorum now waits for it:
// its buckets (retry tickets, rate, budget) and its consumers are looked up again until the
// cluster answers.
func TestGatesStartWhileTheClusterHasNoQuorum(t *testing.T) {
	started := time.Now()
	c := natstest.StartCluster(t, 3)
	nc, js := c.Connect(0)
	ctx := context.Background()
	if err := (natsx.Provisioning{Provision: true, Topology: natsx.TopologyOptions{Replicas: 3}}).AtStart(ctx, js, logx.Discard()); err != nil {
		t.Fatal(err)
	}

	t.Logf("provisioned after %s", time.Since(started).Round(time.Millisecond))
	c.Stop(1)
	c.Stop(2)

	var logs logxtest.Buffer
	// The nodes come back once the gates have found the cluster without a quorum (a timer
	// raced a slow start on a busy machine: the gates then never saw it).
	back := make(chan struct{})
	go func() {
		defer close(back)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if strings.Contains(logs.String(), "JetStream did not answer yet") {
				break
			}
		}
		c.Start(1)
		c.Start(2)
	}()
	defer func() { <-back }()
	log := slog.New(slog.NewTextHandler(&logs, nil))
	app, err := runtime.New(runtime.Options{Name: "gate", Conn: nc, JetStream: js, Registerer: prometheus.NewRegistry(),
		Logger: log, Retries: -1, CloseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	deps := gates.Deps{JetStream: js, Signers: attesttest.New().Signers, Config: testConfig(), Registerer: prometheus.NewRegistry(), Logger: log}
	if err := gates.Builtin().Register(context.Background(), app, deps, []string{gates.Schema, gates.Rate, gates.Audit}); err != nil {
		t.Fatalf("the gates did not wait for the cluster: %v\n%s", err, logs.String())
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("app: %v", err)
		}
	}()
	natstest.WaitFor(t, time.Minute, "the gates' consumers", func() bool { return app.Ready(ctx) == nil })
	t.Logf("running after %s", time.Since(started).Round(time.Millisecond))
	if !strings.Contains(logs.String(), "JetStream did not answer yet") {
		t.Fatalf("the cluster answered at once: the test no longer starts the gates without a quorum\n%s", logs.String())
	}
}

// A player's moves leave the gates in the order they came, even when a gate process died
// holding the first: the restarted process takes nothing until the held one can be redelivered
// first. Before, the second and third moves passed at once and the first 10–30 s later, and
// the event-processor refused the later moves ("moved since the move was proposed"): chaos
// counted hundreds of such refusals after a gate process was killed.
func TestGatesKeepAPlayersOrderAcrossACrash(t *testing.T) {
	s := newStack(t)
	var ids []string
	for i, step := range [][2]string{{"loc:square", "loc:gate"}, {"loc:gate", "loc:square"}, {"loc:square", "loc:market"}} {
		p := startAt(proposal(t, events.KindPlayerMoved, map[string]any{"playerId": "player:ada", "fromLocationId": step[0], "toLocationId": step[1],
			"direction": []string{"north", "south", "east"}[i]}), gates.Rate)
		ids = append(ids, p.ProposalID)
		s.publish(t, p)
	}
	// The process that dies: the rate gate's consumer as Register configures it, the first move
	// fetched and never acknowledged.
	cfg := testConfig()
	cfg.AckWait = time.Second
	spec := runtime.Consumer{Stream: events.StreamProposals, Durable: gates.Durable(gates.Rate), Subjects: gates.InputSubjects(gates.Rate),
		MaxDeliver: cfg.MaxDeliver, Backoff: cfg.Backoff, AckWait: cfg.AckWait}
	natstest.DieHolding(t, s.nats.JS, spec.Stream, spec.ServerConfig())

	s.run(t, s.deps(cfg), gates.Rate)
	natstest.WaitFor(t, 30*time.Second, "the three moves past the rate gate", func() bool {
		return s.count(t, events.StreamProposals, "proposals.gate.audit") == 3
	})
	var got []string
	for _, m := range s.messages(t, events.StreamProposals, "proposals.gate.audit") {
		got = append(got, events.ActorKey("", m.Data())+" "+proposalID(t, m.Data()))
	}
	want := []string{"player:player:ada " + ids[0], "player:player:ada " + ids[1], "player:player:ada " + ids[2]}
	if !slices.Equal(got, want) {
		t.Fatalf("moves left the gate as %v, want %v", got, want)
	}
}

func proposalID(t *testing.T, data []byte) string {
	t.Helper()
	var p struct {
		ProposalID string `json:"proposalId"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	return p.ProposalID
}
