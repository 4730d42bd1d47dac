package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/events/route"
	"github.com/worldgate/worldgate/services/gate/gates"
	"github.com/worldgate/worldgate/services/worldgate/policy"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/llm/openai"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/mcpx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natsauth"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
	"github.com/worldgate/worldgate/shared/runtime/runtimetest"
)

func TestStatusListsRunningWorkers(t *testing.T) {
	e := natstest.Start(t)
	app, err := runtime.New(runtime.Options{Name: "probe", Conn: e.Conn, JetStream: e.JS, Registerer: prometheus.NewRegistry(), Logger: logx.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	app.Handle("probe", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.probe"}},
		func(*message.Message) ([]*message.Message, error) { return nil, nil })
	runtimetest.Start(t, app)

	var out bytes.Buffer
	if err := runStatus(context.Background(), []string{"-nats-url", e.Server.ClientURL(), "-wait", "500ms"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "worldgate-probe") {
		t.Fatalf("status did not list the running worker:\n%s", out.String())
	}
}

func TestStatusNamesAnUnreachableServer(t *testing.T) {
	err := runStatus(context.Background(), []string{"-nats-url", "nats://127.0.0.1:1"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "nats://127.0.0.1:1") {
		t.Fatalf("want an error naming the URL, got %v", err)
	}
}

func TestStatusShowsEachLLMTargetsCircuit(t *testing.T) {
	e := natstest.Start(t)
	// A provider whose account is out of credit: its circuit opens at the first call.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(429)
		_, _ = io.WriteString(w, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	}))
	defer up.Close()
	p, err := openai.New(openai.Config{Name: "broke", BaseURL: up.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := llm.NewRegistry(llm.Config{Tiers: map[string][]string{"cheap": {"broke:gpt-4o-mini"}}}, llm.WithProviders(p), llm.WithLogger(logx.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Complete(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); llm.KindOf(err) != llm.KindQuota {
		t.Fatalf("err = %v", err)
	}
	app, err := runtime.New(runtime.Options{Name: "ai-worker", Conn: e.Conn, JetStream: e.JS, Registerer: prometheus.NewRegistry(), Logger: logx.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	app.AddStats("llm", func() any { return reg.Health() })
	app.Handle("probe", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.probe"}},
		func(*message.Message) ([]*message.Message, error) { return nil, nil })
	runtimetest.Start(t, app)

	var out bytes.Buffer
	if err := runStatus(context.Background(), []string{"-nats-url", e.Server.ClientURL(), "-wait", "500ms"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "broke:gpt-4o-mini") {
			row = l
		}
	}
	if !strings.Contains(row, "open") || !strings.Contains(row, "exceeded your current quota") {
		t.Fatalf("status should list broke:gpt-4o-mini as open with its last error:\n%s", out.String())
	}
}

// The four MCP servers register with NATS service discovery through mcpx.Run, each as its own
// NATS user of the policy (deploy/nats), and worldgate status, as the operator, lists them with
// their health: a server whose readiness fails shows why.
func TestStatusListsTheMCPServersWithTheirHealth(t *testing.T) {
	rs, err := policy.Roles(gates.Builtin(), route.Default())
	if err != nil {
		t.Fatal(err)
	}
	pw := func(role string) string { return "pw-" + role }
	srv, err := natsx.StartEmbedded(natsx.EmbeddedConfig{StoreDir: t.TempDir(), Users: natsauth.Users(rs, pw)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	servers := map[string]mcpx.Readiness{
		natsauth.MCPWorld:    func(context.Context) error { return nil },
		natsauth.MCPLore:     func(context.Context) error { return errors.New("graph unreachable") },
		natsauth.MCPClassify: nil,
		natsauth.MCPPropose:  func(context.Context) error { return nil },
	}
	var running sync.WaitGroup
	for name, ready := range servers {
		nc, _, err := natsx.Connect(natsx.ConnConfig{URL: srv.ClientURL(), Name: name, User: name, Password: pw(name)}, logx.Discard())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		running.Add(1)
		go func() {
			defer running.Done()
			err := mcpx.Run(ctx, mcpx.RunOptions{Flags: &mcpx.CommonFlags{Listen: "127.0.0.1:0", Transport: "http"}, Service: name,
				Logger: logx.Discard(), Handler: http.NewServeMux(), Ready: ready, NATS: nc, Version: "1.2.3"})
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	defer running.Wait()
	defer cancel()

	args := []string{"-nats-url", srv.ClientURL(), "-nats-user", natsauth.Operator, "-nats-password", pw(natsauth.Operator), "-wait", "1s"}
	var out bytes.Buffer
	natstest.WaitFor(t, 20*time.Second, "the four MCP servers in worldgate status", func() bool {
		out.Reset()
		if err := runStatus(context.Background(), args, &out, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		return strings.Count(out.String(), "worldgate-mcp-") == 4
	})
	for _, line := range strings.Split(out.String(), "\n") {
		name, _, _ := strings.Cut(line, " ")
		want := map[string]string{"worldgate-mcp-world": " ok ", "worldgate-mcp-classify": " ok ", "worldgate-mcp-propose": " ok ",
			"worldgate-mcp-lore": " graph unreachable "}[name]
		if want != "" && (!strings.Contains(line, want) || !strings.Contains(line, "1.2.3")) {
			t.Errorf("status of %s: want health %q and version 1.2.3 in\n%s", name, strings.TrimSpace(want), line)
		}
	}
	t.Logf("worldgate status:\n%s", out.String())
}
