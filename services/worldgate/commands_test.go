package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/services/worldgate/worldfile"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

func TestWorldLoadSendsEveryEntityOnceThroughTheFirstGate(t *testing.T) {
	e := natstest.Start(t)
	file := writeLines(t, string(worldfile.Demo()))
	for i := 0; i < 2; i++ {
		var out, errOut bytes.Buffer
		if err := runWorld(context.Background(), []string{"load", "-f", file, "-nats-url", e.Server.ClientURL()}, &out, &errOut); err != nil {
			t.Fatalf("world load: %v\n%s", err, errOut.String())
		}
	}
	n := natstest.StreamMsgs(t, e.JS, events.StreamProposals, events.EmitSubject(events.EmitterOperator))
	if n < 40 {
		t.Fatalf("only %d proposals reached the schema gate for the demo world", n)
	}
	// The second load was deduplicated by the proposals' deterministic ids.
	total := natstest.StreamMsgs(t, e.JS, events.StreamProposals, "")
	if total != n {
		t.Fatalf("%d messages on PROPOSALS after loading twice, want %d", total, n)
	}
}

func TestWorldLoadReportsTheLineOfAnError(t *testing.T) {
	file := writeLines(t, "world: broken", "locations:", "  - id: loc:a", "    name: A", "    colour: red")
	err := runWorld(context.Background(), []string{"load", "-f", file, "-validate-only"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), ":5") {
		t.Fatalf("want an error naming line 5, got %v", err)
	}
}

func TestProposalsListEmptyAndRejectNeedsReason(t *testing.T) {
	e := natstest.Start(t)
	var out bytes.Buffer
	if err := runProposals(context.Background(), []string{"list", "-nats-url", e.Server.ClientURL()}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no proposals waiting") {
		t.Fatalf("list said %q", out.String())
	}
	err := runProposals(context.Background(), []string{"reject", "p-1", "-nats-url", e.Server.ClientURL()}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "-reason") {
		t.Fatalf("want a request for a reason, got %v", err)
	}
	// The id may also follow the flags.
	err = runProposals(context.Background(), []string{"show", "-nats-url", e.Server.ClientURL(), "p-1"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || strings.Contains(err.Error(), "needs a proposal id") || !strings.Contains(err.Error(), "p-1") {
		t.Fatalf("show after flags: %v", err)
	}
}
