package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/llm"
	"github.com/worldgate/worldgate/shared/llm/openai"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
	"github.com/worldgate/worldgate/shared/runtime"
)

func TestStatusListsRunningWorkers(t *testing.T) {
	e := natstest.Start(t)
	app, err := runtime.New(runtime.Options{Name: "probe", Conn: e.Conn, JetStream: e.JS, Registerer: prometheus.NewRegistry(), Logger: logx.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	app.Handle("probe", runtime.Consumer{Stream: events.StreamProposals, Subjects: []string{"proposals.gate.probe"}},
		func(*message.Message) ([]*message.Message, error) { return nil, nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() { cancel(); <-done }()
	natstest.WaitFor(t, 5*time.Second, "worker running", func() bool { return app.Ready(ctx) == nil })

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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() { cancel(); <-done }()
	natstest.WaitFor(t, 5*time.Second, "worker running", func() bool { return app.Ready(ctx) == nil })

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
