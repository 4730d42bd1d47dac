package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/worldgate/policy"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// The whole pipeline of `worldgate dev` runs under the production NATS users: every worker
// connected as its own role, the demo world loaded as the operator, a world event published
// with endpoints.json's publisher credentials reaching the committed log, discovery answering
// the operator, and no permissions violation anywhere.
func TestDevPipelineRunsUnderPerRoleNATSUsers(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "worldgate.log")
	logOut, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logOut.Close()
	f := devFlags{dataDir: dir, host: "127.0.0.1", noDemo: true}
	ctx := context.Background()
	// Starting loads the demo world: proposals published as the operator pass every gate and
	// are committed by the event-processor, each on its own user.
	st, err := startStack(ctx, f, logx.New(logOut, "worldgate-dev", "debug"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	world := natstest.StreamMsgs(t, st.JS, events.StreamCommitted, "")
	if world == 0 {
		t.Fatal("the demo world was not committed")
	}

	connz, err := st.NATS.Server().Connz(&server.ConnzOptions{Username: true})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, c := range connz.Conns {
		users = append(users, c.AuthorizedUser)
	}
	want := []string{natsauth.Admin, natsauth.Operator, natsauth.AIWorker, natsauth.EventProcessor, natsauth.MCPWorld}
	for _, g := range gates.Builtin().Known() {
		want = append(want, natsauth.GateRole(g)) // each gate its own user
	}
	for _, role := range want {
		if !slices.Contains(users, role) {
			t.Errorf("no connection as %s; connected users: %v", role, users)
		}
	}

	raw, err := os.ReadFile(filepath.Join(dir, "endpoints.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ep struct {
		URL       string                       `json:"nats.url"`
		Publisher map[string]string            `json:"nats.publisher"`
		Operator  map[string]string            `json:"nats.operator"`
		Approvers map[string]map[string]string `json:"nats.approvers"`
	}
	if err := json.Unmarshal(raw, &ep); err != nil {
		t.Fatal(err)
	}
	if ep.Publisher["user"] != natsauth.Publisher || ep.Publisher["password"] == "" || ep.Operator["user"] != natsauth.Operator {
		t.Fatalf("endpoints.json does not name the publisher and operator credentials: %s", raw)
	}
	// One approver by default, the login name: deciding held proposals takes a person's own user.
	if a := ep.Approvers[defaultApprover()]; len(ep.Approvers) != 1 || a["user"] != natsauth.ApproverRole(defaultApprover()) || a["password"] == "" {
		t.Fatalf("endpoints.json does not name the default approver %q: %s", defaultApprover(), raw)
	}
	var stderr bytes.Buffer
	err = runPublish(ctx, []string{"-nats-url", ep.URL, "-nats-user", ep.Publisher["user"], "-nats-password", ep.Publisher["password"],
		"-type", events.PlayerMoveRequested, "-actor", "player:player:ana",
		"-payload", `{"playerId":"player:ana","fromLocationId":"loc:ash-gate","direction":"north"}`}, &bytes.Buffer{}, &stderr)
	if err != nil {
		t.Fatalf("publish as publisher: %v\n%s", err, stderr.String())
	}
	natstest.WaitFor(t, 30*time.Second, "the move to be committed", func() bool {
		return natstest.StreamMsgs(t, st.JS, events.StreamCommitted, "") > world
	})

	var out bytes.Buffer
	err = runStatus(ctx, []string{"-nats-url", ep.URL, "-nats-user", ep.Operator["user"], "-nats-password", ep.Operator["password"], "-wait", "500ms"}, &out, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"worldgate-ai-worker", "worldgate-gate", "worldgate-event-processor"} {
		if !strings.Contains(out.String(), svc) {
			t.Errorf("status as operator did not list %s:\n%s", svc, out.String())
		}
	}
	out.Reset()
	err = runProposals(ctx, []string{"list", "-all", "-nats-url", ep.URL, "-nats-user", ep.Operator["user"], "-nats-password", ep.Operator["password"]}, &out, &stderr)
	if err != nil {
		t.Fatalf("proposals list as operator: %v\n%s", err, stderr.String())
	}

	st.stop()
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(string(log)), "permissions violation") {
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(strings.ToLower(line), "permissions violation") {
				t.Error(line)
			}
		}
	}
}

// `worldgate nats-config` writes what is committed in deploy/nats and docs.
func TestNATSConfigWritesTheCommittedFiles(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "nats-permissions.md")
	if err := runNATSConfig(context.Background(), []string{"-out", dir, "-doc", doc, "-approvers", policy.ExampleApprover}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for got, committed := range map[string]string{
		filepath.Join(dir, natsauth.AuthConfFile):   "../../deploy/nats/" + natsauth.AuthConfFile,
		filepath.Join(dir, natsauth.ServerConfFile): "../../deploy/nats/" + natsauth.ServerConfFile,
		doc: "../../docs/nats-permissions.md",
	} {
		a, err := os.ReadFile(got)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(committed)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from what nats-config writes: run `go generate ./services/worldgate/policy`", committed)
		}
	}
}

// `worldgate provision` creates the topology as the admin user of a server with the users.
func TestProvisionAsAdmin(t *testing.T) {
	rs, err := policy.Roles(gates.Builtin(), route.Default())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: t.TempDir(), Users: natsauth.Users(rs, func(r string) string { return "pw-" + r })})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	var out bytes.Buffer
	args := []string{"-nats-url", srv.ClientURL(), "-nats-user", natsauth.Admin, "-nats-password", "pw-" + natsauth.Admin}
	if err := runProvision(context.Background(), args, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	nc, js, err := natsx.Connect(natsx.ConnConfig{URL: srv.ClientURL(), User: natsauth.Operator, Password: "pw-" + natsauth.Operator}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, s := range natsx.DefaultTopology(natsx.TopologyOptions{}).Streams {
		if natstest.StreamMsgs(t, js, s.Name, "") != 0 {
			t.Errorf("stream %s is not empty", s.Name)
		}
	}
}

// `worldgate k8s-gates` writes what is committed in deploy/kubernetes/base/gates, and nothing
// else is there: a gate's deployment comes from the registry only.
func TestK8sGatesWritesTheCommittedFiles(t *testing.T) {
	dir := t.TempDir()
	if err := runK8sGates(context.Background(), []string{"-out", dir}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	const committed = "../../deploy/kubernetes/base/gates"
	want, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadDir(committed)
	if err != nil {
		t.Fatal(err)
	}
	if len(have) != len(want) || len(want) != len(gates.Builtin().Known())+1 {
		t.Errorf("%s has %d files, k8s-gates writes %d (one per gate of the registry and the kustomization)", committed, len(have), len(want))
	}
	for _, e := range want {
		a, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		b, err := os.ReadFile(filepath.Join(committed, e.Name()))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s/%s differs from what k8s-gates writes (%v): run `go generate ./services/worldgate/policy`", committed, e.Name(), err)
		}
	}
}

// nats-config writes the users of gate processes a deployment runs as sets, fused or not:
// `gate -gate schema,safety -fuse=false` publishes the hop between its gates, so its user is
// its own.
func TestNATSConfigWritesGateSetUsers(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-out", dir, "-gate-sets", "schema,safety", "-unfused-gate-sets", "schema,safety; all"}
	if err := runNATSConfig(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	auth, err := os.ReadFile(filepath.Join(dir, natsauth.AuthConfFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"gates-schema-safety", "gates-schema-safety-unfused", "gates-unfused"} {
		if !strings.Contains(string(auth), `"`+user+`"`) {
			t.Errorf("%s has no user %s", natsauth.AuthConfFile, user)
		}
	}
	err = runNATSConfig(context.Background(), []string{"-out", dir, "-unfused-gate-sets", "schema,vibes"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "-unfused-gate-sets") || !strings.Contains(err.Error(), "vibes") {
		t.Fatalf("an unknown gate in an unfused set: %v", err)
	}
}
