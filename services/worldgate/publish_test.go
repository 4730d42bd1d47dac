package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

const (
	goodLine = `{"type":"Player.Moved","actor":{"kind":"player","id":"player:ada"},"payload":{"playerId":"player:ada","fromLocationId":"loc:a","toLocationId":"loc:b"}}`
	badField = `{"type":"Player.Moved","actor":{"kind":"player","id":"player:ada"},"payload":{"playerId":"player:ada","fromLocationId":"loc:a","toLocationId":"loc:b","speed":3}}`
	badType  = `{"type":"Player.Flew","actor":{"kind":"player","id":"player:ada"},"payload":{}}`
	notJSON  = `{"type":`
)

func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func exitCode(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestValidateOnlyReportsEachBadLine(t *testing.T) {
	file := writeLines(t, goodLine, badField, goodLine, badType, notJSON)
	var stderr bytes.Buffer
	err := runPublish(context.Background(), []string{"-f", file, "-fill", "-validate-only"}, &bytes.Buffer{}, &stderr)
	if exitCode(err) != 1 {
		t.Fatalf("exit %d (%v), want 1", exitCode(err), err)
	}
	out := stderr.String()
	for _, want := range []string{"line 2: ", "/payload/speed", "line 4: ", "/type", "line 5: ", "not valid JSON", "2 valid, 3 invalid"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "line 1:") || strings.Contains(out, "line 3:") {
		t.Errorf("a valid line was reported:\n%s", out)
	}
	if exitCode(runPublish(context.Background(), []string{"-f", writeLines(t, goodLine, goodLine), "-fill", "-validate-only"}, &bytes.Buffer{}, &bytes.Buffer{})) != 0 {
		t.Fatal("all-valid file should exit 0")
	}
}

func TestPublishFilePublishesValidLinesDespiteBadOnes(t *testing.T) {
	e := natstest.Start(t)
	file := writeLines(t, goodLine, badField, goodLine, notJSON, goodLine)
	var stderr bytes.Buffer
	err := runPublish(context.Background(), []string{"-f", file, "-fill", "-nats-url", e.Server.ClientURL()}, &bytes.Buffer{}, &stderr)
	if exitCode(err) != 1 {
		t.Fatalf("exit %d, want 1 because two lines were bad:\n%s", exitCode(err), stderr.String())
	}
	if n := natstest.StreamMsgs(t, e.JS, events.StreamWorld, ""); n != 3 {
		t.Fatalf("WORLD holds %d envelopes, want the 3 valid ones\n%s", n, stderr.String())
	}
	if !strings.Contains(stderr.String(), "published 3") {
		t.Fatalf("summary missing:\n%s", stderr.String())
	}
}

func TestPublishFromFlagsWithIdempotencyKeyLandsOnce(t *testing.T) {
	e := natstest.Start(t)
	args := []string{"-nats-url", e.Server.ClientURL(), "-type", "Player.SpokeToNPC", "-actor", "player:player:ada",
		"-idempotency-key", "retry-me", "-payload", `{"playerId":"player:ada","npcId":"npc:brannoc","locationId":"loc:tavern","utterance":"hello"}`}
	for i := 0; i < 2; i++ {
		var stderr bytes.Buffer
		if err := runPublish(context.Background(), args, &bytes.Buffer{}, &stderr); err != nil {
			t.Fatalf("publish %d: %v\n%s", i, err, stderr.String())
		}
	}
	if n := natstest.StreamMsgs(t, e.JS, events.StreamWorld, "world.events.player.spoketonpc"); n != 1 {
		t.Fatalf("%d copies stored, want 1", n)
	}
}

func TestPublishRefusesAmbiguousInput(t *testing.T) {
	err := runPublish(context.Background(), []string{"-validate-only"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "exactly one of") {
		t.Fatalf("got %v", err)
	}
}
