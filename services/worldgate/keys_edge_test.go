package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/worldgate/worldgate/services/edge/edge"
)

// `worldgate keys edge create|list|revoke` edits edge's keys file (issue 40 item 5): create
// prints the secret once and stores only its SHA-256, in a file edge loads; a duplicate name,
// an unknown scope or a revocation of an unknown key is refused and leaves the file as it was;
// concurrent creates all land; list never shows a secret.
func TestKeysEdgeCreateListRevoke(t *testing.T) {
	file := filepath.Join(t.TempDir(), "edge", "keys.json")
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := runKeys(context.Background(), append([]string{"edge"}, args...), &out, &errOut)
		return out.String() + errOut.String(), err
	}
	out, err := run("create", "-keys-file", file, "-name", "game-eu", "-scopes", "publish,read:all")
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	secret := lines[1]
	if !strings.HasPrefix(secret, "wgk_") || len(secret) < 40 {
		t.Fatalf("create printed no secret on its second line:\n%s", out)
	}
	raw, _ := os.ReadFile(file)
	if strings.Contains(string(raw), secret) {
		t.Fatalf("the keys file holds the secret itself: %s", raw)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("keys file: %v %v", fi, err)
	}
	if out, err := run("create", "-keys-file", file, "-name", "browser-ana", "-players", "player:ana"); err != nil {
		t.Fatalf("create a player key: %v\n%s", err, out)
	}
	keys, err := edge.LoadKeys(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := edge.NewKeyring(keys); err != nil {
		t.Fatalf("edge refuses the file: %v", err)
	}
	if len(keys) != 2 || keys[0].SHA256 != edge.HashSecret(secret) || strings.Join(keys[0].Scopes, ",") != "publish,read:all" ||
		strings.Join(keys[1].Players, ",") != "player:ana" || strings.Join(keys[1].Scopes, ",") != "publish,read:player:ana" {
		t.Fatalf("keys file: %+v", keys)
	}

	before, _ := os.ReadFile(file)
	for _, bad := range [][]string{
		{"create", "-keys-file", file, "-name", "game-eu", "-scopes", "publish"},
		{"create", "-keys-file", file, "-name", "x", "-scopes", "write:all"},
		{"create", "-keys-file", file, "-name", "y", "-players", "player:ana", "-scopes", "read:all"},
		{"revoke", "-keys-file", file, "-name", "nobody"},
	} {
		out, err := run(bad...)
		if err == nil {
			t.Errorf("%v accepted:\n%s", bad, out)
		}
		if strings.Contains(out, "wgk_") {
			t.Errorf("%v printed a secret for a key not stored:\n%s", bad, out)
		}
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
		t.Fatalf("a refused edit changed the file:\n%s", after)
	}
	if _, err := run("create", "-keys-file", file, "-name", "game-eu", "-scopes", "publish"); err == nil || !strings.Contains(err.Error(), `already has a key named "game-eu"`) {
		t.Fatalf("duplicate: %v", err)
	}

	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			if out, err := run("create", "-keys-file", file, "-name", fmt.Sprintf("shard-%d", i), "-scopes", "publish"); err != nil {
				t.Errorf("concurrent create %d: %v\n%s", i, err, out)
			}
		})
	}
	wg.Wait()
	out, err = run("list", "-keys-file", file)
	if err != nil || strings.Count(out, "\n") != 8 || !strings.Contains(out, "browser-ana") || !strings.Contains(out, "players player:ana") || strings.Contains(out, secret) {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if out, err := run("revoke", "-keys-file", file, "-name", "game-eu"); err != nil || !strings.Contains(out, "restart") {
		t.Fatalf("revoke: %v\n%s", err, out)
	}
	keys, err = edge.LoadKeys(file)
	if err != nil || len(keys) != 7 {
		t.Fatalf("after revoke: %v %d keys", err, len(keys))
	}
	for _, k := range keys {
		if k.Name == "game-eu" {
			t.Fatal("game-eu is still listed")
		}
	}
}
