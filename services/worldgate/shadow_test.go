package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// A time range that cannot be read is reported, not taken for a range with no triggers.
func TestShadowReportsAStreamItCannotRead(t *testing.T) {
	e := natstest.Start(t)
	if err := e.JS.DeleteStream(context.Background(), events.StreamWorld); err != nil {
		t.Fatal(err)
	}
	var out, stderr bytes.Buffer
	err := runShadow(context.Background(), []string{"-from", "1h", "-nats-url", e.Server.ClientURL(), "-timeout", "20s", "-model", "scripted:x"}, &out, &stderr)
	if err == nil || !strings.Contains(err.Error(), "stream "+events.StreamWorld) {
		t.Fatalf("want an error naming stream %s, got %v\n%s%s", events.StreamWorld, err, out.String(), stderr.String())
	}
}
