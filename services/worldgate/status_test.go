package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worldgate/worldgate/events"
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
