package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `world load -wait` returns once every proposal of the world is committed, so the next event
// may name its places and people (issue 40: the guide talks to the NPC of the world it just
// loaded); a second load finds the first's commits; a refused proposal is an error naming its
// gate and reason.
func TestWorldLoadWaits(t *testing.T) {
	st := startQuietStack(t)
	op := st.NATSCredentials("operator")
	dir := t.TempDir()
	load := func(name, world string) (string, error) {
		t.Helper()
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(world), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out bytes.Buffer
		err := runWorld(ctx, []string{"load", "-f", file, "-wait", "30s",
			"-nats-url", st.NATS.ClientURL(), "-nats-user", op["user"], "-nats-password", op["password"]}, &out, &bytes.Buffer{})
		return out.String(), err
	}
	const cove = "name: cove\nlocations:\n  - {id: loc:cove, name: The Cove, description: Black sand and a beached boat.}\n" +
		"npcs:\n  - {id: npc:fisher, name: Old Fisher, location: loc:cove}\n"
	for _, attempt := range []string{"first", "again"} {
		out, err := load("cove.yaml", cove)
		if err != nil || !strings.Contains(out, "committed 2 of 2 proposals of world cove") {
			t.Fatalf("%s load: %v\n%s", attempt, err, out)
		}
	}
	const bad = "name: spam\nlocations:\n  - {id: loc:spam, name: Spam, description: Visit https://evil.example/free for free gold.}\n"
	out, err := load("spam.yaml", bad)
	if err == nil || !strings.Contains(err.Error(), "world:spam:location_created:loc:spam: refused by the") {
		t.Fatalf("a refused world: %v\n%s", err, out)
	}
	t.Log(err)
}
